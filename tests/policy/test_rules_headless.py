"""End to end: a headless `kestrel -p` run, in default mode, runs real heredoc and `python -c`
commands of recorded agent sessions without asking, under `--allow` rules in the rule syntax for
real commands, and still refuses what those rules do not name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

COMMANDS = json.loads((Path(__file__).parent / "data" / "replay_commands.json").read_text())
RULES = [
    "BashHeredoc(cat)",
    "Bash(python -c *)",
    "Bash(python3 -c *)",
    "Bash(python3 check_packaging.py)",
]


def _run(tmp_path: Path, commands: list[str]) -> list[dict[str, Any]]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": c, "timeout": 60}}]}
        for c in commands
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([*turns, {"text": "done"}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
    }
    allow = [arg for rule in RULES for arg in ("--allow", rule)]
    args = ["-p", "reproduce the issue", "--model", f"scripted:{script}", *allow]
    args += ["--permission-mode", "default", "--output-format", "stream-json"]
    done = subprocess.run(
        [sys.executable, "-m", "kestrel", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [r["event"] for r in records if r["event"]["type"] == "permission_decided"]


def test_real_heredoc_and_python_c_commands_run_without_asking(tmp_path: Path) -> None:
    commands = [c["command"].replace("/testbed", str(tmp_path / "project")) for c in COMMANDS]
    decided = _run(tmp_path, commands)
    refused = [(e["decision"], e.get("reason")) for e in decided if e["decision"] != "allow"]
    assert refused == []
    assert len(decided) == len(commands)
    assert all(e["decided_by"] == "rule" for e in decided)
    # The session works on an overlay of the project: the file is in the session's layer.
    written = next((tmp_path / "data").rglob("check_packaging.py")).read_text()
    assert written == commands[0].split("\n", 1)[1].split("\nEOF\n")[0] + "\n"


def test_the_same_rules_still_refuse_what_they_do_not_name(tmp_path: Path) -> None:
    commands = [
        "cat <<EOF > x.py\n$(id)\nEOF",  # the heredoc body runs a command
        "python3 -X dev -c 'print(1)'",  # `-c` is not right after `python3`
        "cat <<'EOF' > ../outside.py\nx = 1\nEOF",  # a write outside the workspace
    ]
    decided = _run(tmp_path, commands)
    assert [e["decision"] for e in decided] == ["deny", "deny", "deny"]
    assert not (tmp_path / "outside.py").exists()
    assert not list((tmp_path / "data").rglob("x.py"))
