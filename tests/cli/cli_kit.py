"""Run the real `kestrel` command in a subprocess, with its data and home in a temporary place."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

KESTREL = [sys.executable, "-m", "kestrel"]
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"
TESTS = (
    "from calc import add, double\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_double():\n    assert double(4) == 8\n"
)


def fix_script() -> list[dict[str, object]]:
    """A scripted session that reads, greps, runs failing tests, fixes, and runs them again."""
    return [
        {
            "text": "Looking for add.",
            "tool_calls": [{"name": "grep", "arguments": {"pattern": "def add"}}],
        },
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": PYTEST}}]},
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {
                        "path": "calc.py",
                        "old_str": "return a - b",
                        "new_str": "return a + b",
                    },
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "NOTES.md", "content": "add() subtracted; fixed.\n"},
                }
            ]
        },
        {"tool_calls": [{"name": "bash", "arguments": {"command": PYTEST}}]},
        {"text": "Fixed: add now adds."},
    ]


class Env:
    """A project directory, a script, and an environment isolated from the user's own."""

    def __init__(self, tmp: Path) -> None:
        self.project = tmp / "project"
        self.project.mkdir()
        (self.project / "calc.py").write_text(BUGGY)
        (self.project / "test_calc.py").write_text(TESTS)
        self.script = tmp / "script.json"
        self.script.write_text(json.dumps(fix_script()))
        home = tmp / "home"
        home.mkdir()
        # The user's own settings allow the test command, as a person would for this project.
        settings = home / ".config" / "kestrel" / "settings.toml"
        settings.parent.mkdir(parents=True)
        settings.write_text(f"[permissions]\nallow = [{json.dumps(f'Bash({PYTEST}:*)')}]\n")
        self.vars = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "KESTREL_DATA_DIR": str(tmp / "data"),
            # Sessions run in the sandbox, as by default, wherever bubblewrap is installed (CI
            # always); elsewhere the tests still run, unconfined, as `--sandbox none` would.
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run kestrel to the end."""
        return subprocess.run(
            [*KESTREL, *args],
            env=self.vars,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
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

    def headless(self, *extra: str) -> list[str]:
        """The arguments of a headless scripted run of the fix task."""
        return [
            "-p",
            "fix the failing tests",
            "--model",
            f"scripted:{self.script}",
            "--permission-mode",
            "accept-edits",
            *extra,
        ]

    def files(self) -> dict[str, str]:
        """The project's text files, without caches."""
        return {
            str(p.relative_to(self.project)): p.read_text()
            for p in sorted(self.project.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }


def lines_of(output: str) -> list[dict[str, object]]:
    """Parse JSON Lines output."""
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def types(records: Sequence[dict[str, object]]) -> list[str]:
    """The event types of parsed records, in order."""
    return [r["event"]["type"] for r in records]  # type: ignore[index]


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A process on a pseudo-terminal that a test reads from and types into."""

    def __init__(self, env: Env, *args: str, extra_env: dict[str, str] | None = None) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [*KESTREL, *args],
            env={**env.vars, "COLUMNS": "200", **(extra_env or {})},
            cwd=env.project,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; screen so far:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    chunk = ""
                if not chunk:
                    assert text in self.seen, f"exited before {text!r}:\n{self.seen}"
                self.seen += ANSI.sub("", chunk).replace("\r", "")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=60)
        os.close(self.master)
        return code
