"""Run the real `kestrel` command against a real event store, and break that store on purpose."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

KESTREL = [sys.executable, "-m", "kestrel"]
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
RUN_FLAGS = ("--workspace", "direct", "--sandbox", "none", "--permission-mode", "accept-edits")
"""Edits land in the project itself, commands run unconfined, edits need no approval."""


def fix_script() -> list[dict[str, object]]:
    """A scripted session that runs the failing test, fixes it, and runs it again."""
    bash = {"name": "bash", "arguments": {"command": PYTEST}}
    edit = {
        "name": "edit_file",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
    }
    return [
        {"text": "Running the tests.", "tool_calls": [bash]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [edit]},
        {"tool_calls": [bash]},
        {"text": "Fixed: add now adds."},
    ]


def slow_script() -> list[dict[str, object]]:
    """A scripted session that waits three seconds in a command, then answers."""
    return [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 3"}}]},
        {"text": "slept"},
    ]


class Kestrel:
    """Projects, scripts and one data directory, isolated from the user's own."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.db = self.data / "sessions.db"
        home = tmp / "home"
        settings = home / ".config" / "kestrel" / "settings.toml"
        settings.parent.mkdir(parents=True)
        allowed = [f"Bash({PYTEST}:*)", "Bash(sleep:*)"]
        settings.write_text(f"[permissions]\nallow = {json.dumps(allowed)}\n")
        self.vars = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "KESTREL_DATA_DIR": str(self.data),
            "PYTHONUNBUFFERED": "1",
        }
        self.project = self.new_project("project")

    def new_project(self, name: str) -> Path:
        """A folder with a failing test and the script that fixes it."""
        project = self.tmp / name
        project.mkdir()
        (project / "calc.py").write_text(BUGGY)
        (project / "test_calc.py").write_text(TESTS)
        (self.tmp / f"{name}.json").write_text(json.dumps(fix_script()))
        (self.tmp / "slow.json").write_text(json.dumps(slow_script()))
        return project

    def task(self, project: Path | None = None, script: str = "") -> list[str]:
        """The arguments of a headless scripted run in `project`."""
        project = project or self.project
        script_path = self.tmp / (script or f"{project.name}.json")
        return ["-p", "fix the test", "--model", f"scripted:{script_path}", *RUN_FLAGS]

    def run(
        self, *args: str, project: Path | None = None, fsize: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kestrel to the end; `fsize` caps every file it writes at that many bytes."""
        return subprocess.run(
            [*KESTREL, *args],
            env=self.vars,
            cwd=project or self.project,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            preexec_fn=None if fsize is None else _file_size_limit(fsize),
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start kestrel, reading its stdout line by line."""
        return subprocess.Popen(
            [*KESTREL, *args],
            env=self.vars,
            cwd=self.project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )

    def session_ids(self) -> list[str]:
        """Every session's id, as `kestrel sessions list --all --json` gives them."""
        listed = self.run("sessions", "list", "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        return [row["session_id"] for row in json.loads(listed.stdout)]

    def sql(self, statement: str, *params: object) -> list[tuple[object, ...]]:
        """Run one statement on the store with a connection of its own."""
        conn = sqlite3.connect(self.db)
        try:
            with conn:
                return conn.execute(statement, params).fetchall()
        finally:
            conn.close()


def _file_size_limit(size: int) -> Callable[[], None]:
    def limit() -> None:
        # Ignored, the signal a write past the limit raises makes that write fail with EFBIG.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def one_line(stderr: str) -> str:
    """The single line a failure printed; fails the test on a traceback or on more lines."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("kestrel: "), stderr
    return lines[0]
