"""Plan mode at a terminal: the person rejects, then edits the plan in $EDITOR and approves it."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time

from cli_kit import BUGGY, KESTREL, Env

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# The "editor" renames the second step's file, as a person would in their editor.
EDITOR = """
import json, sys
path = sys.argv[1]
plan = json.load(open(path))
plan["steps"][1]["title"] = "Record the fix in CHANGES.md"
plan["steps"][1]["files"] = ["CHANGES.md"]
open(path, "w").write(json.dumps(plan))
"""


class PlanTerminal:
    """kestrel on a pseudo-terminal: read what it prints, type answers."""

    def __init__(self, env: Env, *args: str, extra_env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [*KESTREL, *args],
            env={**env.vars, "COLUMNS": "200", **extra_env},
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
                assert chunk or text in self.seen, f"exited before {text!r}:\n{self.seen}"
                self.seen += ANSI.sub("", chunk).replace("\r", "")

    def type(self, line: str) -> None:
        """Answer; later expectations look only at what is printed from now on."""
        self.seen = ""
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=60)
        os.close(self.master)
        return code


def test_reject_then_edit_and_approve_at_the_terminal(env: Env) -> None:
    plan = [
        {"id": "fix", "title": "Make add() add", "files": ["calc.py"]},
        {"id": "notes", "title": "Write NOTES.md", "files": ["NOTES.md"], "depends_on": ["fix"]},
    ]
    propose = {"name": "propose_plan", "arguments": {"summary": "Fix add.", "steps": plan}}
    fix = {
        "name": "edit_file",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
    }
    write = {"name": "write_file", "arguments": {"path": "CHANGES.md", "content": "fixed\n"}}
    env.script.write_text(
        json.dumps(
            [
                {"tool_calls": [propose]},
                {"tool_calls": [propose]},  # Proposed again after the rejection.
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
                {"tool_calls": [fix]},
                {"tool_calls": [write]},
                {"text": "Followed the plan."},
            ]
        )
    )
    editor = env.project.parent / "editor.py"
    editor.write_text(EDITOR)
    term = PlanTerminal(
        env,
        "--plan",
        "--permission-mode",
        "accept-edits",
        "fix the tests",
        "--model",
        f"scripted:{env.script}",
        extra_env={"EDITOR": f"{sys.executable} {editor}", "VISUAL": ""},
    )
    term.expect("2. [notes] Write NOTES.md")
    term.expect("[a]pprove / [e]dit")
    term.type("r")
    term.expect("Why?")
    term.type("keep it small")
    term.expect("rejected: keep it small")
    term.expect("[r]eject / [q]uit")
    term.type("e")
    term.expect("approved (edited); continuing in accept-edits mode")
    term.expect("task list from the approved plan:")
    term.expect("[ ] notes: Record the fix in CHANGES.md")
    term.expect("Followed the plan.")
    term.expect("── done")
    term.type("")  # No follow-up.
    assert term.close() == 0
    files = env.files()
    assert files["calc.py"] == BUGGY.replace("a - b", "a + b")
    assert files["CHANGES.md"] == "fixed\n" and "NOTES.md" not in files


def test_plan_switch_at_the_follow_up_prompt(env: Env) -> None:
    """`/plan MESSAGE` at the prompt puts the session in plan mode for that message."""
    plan = [{"id": "fix", "title": "Make add() add", "files": ["calc.py"]}]
    propose = {"name": "propose_plan", "arguments": {"summary": "Fix add.", "steps": plan}}
    early = {"name": "write_file", "arguments": {"path": "calc.py", "content": "x = 1\n"}}
    fix = {
        "name": "edit_file",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
    }
    env.script.write_text(
        json.dumps(
            [
                {"text": "Looked around."},
                {"tool_calls": [early]},  # refused: the session is in plan mode now
                {"tool_calls": [propose]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
                {"tool_calls": [fix]},
                {"text": "Fixed as planned."},
            ]
        )
    )
    term = PlanTerminal(
        env,
        "--permission-mode",
        "accept-edits",
        "look at calc.py",
        "--model",
        f"scripted:{env.script}",
        extra_env={},
    )
    term.expect("Looked around.")
    term.expect("> ")
    term.type("/what")
    term.expect("Commands: /plan")
    term.type("/plan fix the tests")
    term.expect("Plan mode:")
    term.expect("1. [fix] Make add() add")
    term.expect("[a]pprove / [e]dit")
    term.type("a")
    term.expect("Fixed as planned.")
    term.expect("── done")
    term.type("")
    assert term.close() == 0
    assert env.files()["calc.py"] == BUGGY.replace("a - b", "a + b")
