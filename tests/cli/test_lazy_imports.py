"""The light commands start without the heavy modules: `kestrel --help`, `--version` and
`sessions list` import no model SDK, no tree-sitter, no numpy and not the agent loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("anthropic", "openai", "tree_sitter", "numpy", "kestrel.app", "kestrel.agent.loop")

# Runs the real entry point as `kestrel ARGS`, then prints the names of the imported modules.
PROBE = """\
import json, sys
sys.argv = ["kestrel", *json.loads(sys.argv[1])]
from kestrel.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def _imported(args: list[str], tmp_path: Path) -> tuple[str, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env.update(HOME=str(tmp_path), KESTREL_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    output, _, modules = done.stdout.rpartition("\nMODULES ")
    return output, set(json.loads(modules))


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (["--help"], "Usage: kestrel"),
        (["--version"], "kestrel "),
        (["sessions", "list"], "No sessions yet"),
        (["help", "sessions"], "list"),
    ],
)
def test_light_commands_import_no_heavy_module(args: list[str], shows: str, tmp_path: Path) -> None:
    output, modules = _imported(args, tmp_path)

    assert shows in output
    loaded = sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY)
    assert loaded == []


def test_the_probe_sees_heavy_modules_where_a_command_needs_them(tmp_path: Path) -> None:
    # `kestrel map` builds the code index: tree-sitter must show up, or the probe sees nothing.
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    _, modules = _imported(["map"], tmp_path)
    assert "tree_sitter" in modules
