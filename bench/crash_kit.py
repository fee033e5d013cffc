"""The scripted session `bench/crash_resume.py` kills: its project, its script, the calls that
change files and what each changes, and the sandbox one trial runs in."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kestrel.protocol.codec import record_to_json
from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

KESTREL = [sys.executable, "-m", "kestrel"]
Files = dict[str, bytes]
Record = dict[str, Any]
Strategy = Literal["lines", "time", "apply"]
Workspace = Literal["overlay", "direct"]

TEST_CMD = "python3 -B -m unittest -q"
WRITE_CMD = "mkdir -p out && echo x > out/a.txt && sleep 0.6 && rm old.txt"
TREE_CMD = (
    "mkdir -p tree/a/b && echo 1 > tree/a/b/one.txt && sleep 0.4 && "
    "mkdir -p tree/c && echo 2 > tree/c/two.txt"
)
PROJECT: dict[str, str] = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n",
    "test_calc.py": (
        "import unittest\n\nfrom calc import add, double\n\n\n"
        "class CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_double(self):\n        self.assertEqual(double(4), 8)\n"
    ),
    "README.md": "# calc\n\nAdds numbers.\n\nSee calc.py.\n",
    "legacy.py": "OLD = True\n",
    "old.txt": "stale\n",
}
PATCH = (
    "*** Begin Patch\n*** Update File: README.md\n # calc\n \n-Adds numbers.\n+Adds and doubles "
    "numbers.\n \n See calc.py.\n*** Add File: docs/usage.md\n+Call add(a, b) or double(x).\n"
    "*** Delete File: legacy.py\n*** End Patch\n"
)


def turn(*calls: tuple[str, dict[str, str]], text: str = "") -> dict[str, Any]:
    """One model turn of the script: some text, then tool calls."""
    spoken = {"text": text} if text else {}
    return spoken | {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


SCRIPT = [
    turn(("grep", {"pattern": "add"}), text="Looking for add."),
    turn(("read_file", {"path": "calc.py"}), ("read_file", {"path": "README.md"})),
    turn(("edit_file", {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"})),
    turn(("write_file", {"path": "NOTES.md", "content": "ok\n"})),
    turn(("apply_patch", {"patch": PATCH})),
    turn(("bash", {"command": WRITE_CMD})),
    turn(("bash", {"command": TREE_CMD})),
    turn(("task", {"description": "write sub", "prompt": "Write sub/.", "agent": "writer"})),
    turn(("bash", {"command": TEST_CMD})),
    turn(text="Fixed add, documented it, cleaned up."),
]
STEPS: dict[str, tuple[str, ...]] = {
    "call_2_0": ("calc.py",),
    "call_3_0": ("NOTES.md",),
    "call_4_0": ("README.md", "docs/usage.md", "legacy.py"),
    "call_5_0": ("out/a.txt", "old.txt"),
    "call_6_0": ("tree/a/b/one.txt", "tree/c/two.txt"),
    "call_7_0": ("sub/one.txt", "sub/two.txt"),
}
"""The calls that change files (by the scripted call ids: turn, then place) and the paths each
one changes: a call cut short by the kill may be missing whole from the end state. `call_7_0`
is a `task` call whose subagent writes one file, then runs a command that writes another."""
WRITER = (
    "---\nname: writer\ndescription: Writes files and runs commands.\n"
    "tools: write_file, bash\nmodel: fast\n---\nDo the task.\n"
)
CHILD_SCRIPT = [
    turn(("write_file", {"path": "sub/one.txt", "content": "1\n"})),
    turn(("bash", {"command": "sleep 0.3 && echo 2 > sub/two.txt"})),
    turn(text="Wrote sub/one.txt and sub/two.txt."),
]
"""What the `writer` subagent of the `task` call does, on the fast role's scripted model."""
RULES = ["Bash(mkdir:*)", "Bash(echo:*)", "Bash(rm:*)", "Bash(sleep:*)", f"Bash({TEST_CMD}:*)"]
TEMP = re.compile(r"\.kestrel-|^\..+\.[0-9a-f]{12}\.tmp$")
"""Names of temporary files: the apply journal's, and those of an atomic write."""
PHASES = (
    "before start",
    "during model streaming",
    "after the final answer, in verification",
    "during a tool",
    "after finish, before changes_applied",
    "after changes_applied",
    "no kill: the run had ended",
)
TOOL_EVENTS = {"tool_call_requested", "permission_decided", "tool_started", "tool_output_chunk"}
TOOL_EVENTS |= {"tool_finished", "file_changed", "checkpoint_created"}


class Sandbox:
    """One trial's directory: the project, the script, and an isolated home and data directory."""

    def __init__(self, root: Path, workspace: Workspace = "overlay") -> None:
        self.root = root
        self.project = root / "project"
        for name, text in PROJECT.items():
            (self.project / name).parent.mkdir(parents=True, exist_ok=True)
            (self.project / name).write_text(text)
        (root / "script.json").write_text(json.dumps(SCRIPT))
        (root / "child.json").write_text(json.dumps(CHILD_SCRIPT))
        settings = root / "home" / ".config" / "kestrel" / "settings.toml"
        (settings.parent / "agents").mkdir(parents=True)
        (settings.parent / "agents" / "writer.md").write_text(WRITER)
        rules = f"[permissions]\nallow = {json.dumps(RULES)}\n"
        models = f"[models]\nfast = [{json.dumps('scripted:' + str(root / 'child.json'))}]\n"
        settings.write_text(f"workspace = {json.dumps(workspace)}\n{models}{rules}")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "home" / ".config"),
            "KESTREL_DATA_DIR": str(root / "data"),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }
        self.spawn: dict[str, Any] = {"env": env, "cwd": self.project, "text": True}
        self.spawn["stdin"] = subprocess.DEVNULL

    def args(self) -> list[str]:
        """The headless run of the scripted task, streaming its events."""
        script = f"scripted:{self.root / 'script.json'}"
        mode = ["--permission-mode", "accept-edits", "--output-format", "stream-json"]
        return ["-p", "fix calc", "--model", script, *mode]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a kestrel command to the end."""
        return subprocess.run([*KESTREL, *args], **self.spawn, capture_output=True, timeout=300)

    def start(self) -> subprocess.Popen[str]:
        """Start the scripted run, its stdout a pipe."""
        pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        return subprocess.Popen([*KESTREL, *self.args()], **self.spawn, **pipes)

    def files(self) -> Files:
        """The checkout's files, without caches."""
        return {
            str(p.relative_to(self.project)): p.read_bytes()
            for p in sorted(self.project.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }

    def export(self, session_id: str) -> list[Record]:
        """The session's log as `kestrel sessions export ID` prints it."""
        with self.store() as store:
            return [json.loads(record_to_json(r)) for r in store.read(store.resolve(session_id))]

    def sessions(self) -> list[str]:
        """The ids `kestrel sessions list --json` shows: the sessions a person started, not
        those of subagents."""
        with self.store() as store:
            return [s.session_id for s in store.sessions() if s.parent_session_id is None]

    @contextlib.contextmanager
    def store(self) -> Iterator[SQLiteStore]:
        """The event log, read in this process: the `kestrel sessions` commands read it the same
        way but spend about 4 s starting (the reference run checks that they agree)."""
        store = SQLiteStore(self.root / "data" / STORE_FILE_NAME)
        try:
            yield store
        finally:
            store.close()


def lines(text: str) -> list[Record]:
    """Parse JSON Lines."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def kinds(records: list[Record]) -> list[str]:
    """The event types of records, in order."""
    return [str(r["event"]["type"]) for r in records]


@dataclass(frozen=True, slots=True)
class Reference:
    """What an uninterrupted run leaves: files, stdout lines, events, wall time."""

    files: Files
    stream_lines: int
    types: list[str]
    tail: list[str]
    wall_s: float
    workspace: Workspace = "overlay"


@dataclass(slots=True)
class Trial:
    """One trial's kill and what the checks found."""

    number: int
    strategy: Strategy
    point: float
    phase: str = ""
    ending: str = ""
    """complete, one step short, or half-done (the checkout after the resume)."""
    last_event: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
