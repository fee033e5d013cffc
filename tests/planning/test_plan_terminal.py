"""Plan mode at a terminal: the person rejects, then edits the plan in $EDITOR and approves it."""

from __future__ import annotations

import json
import sys

from cli_kit import BUGGY, Env, Terminal

# The "editor" renames the second step's file, as a person would in their editor.
EDITOR = """
import json, sys
path = sys.argv[1]
plan = json.load(open(path))
plan["steps"][1]["title"] = "Record the fix in CHANGES.md"
plan["steps"][1]["files"] = ["CHANGES.md"]
open(path, "w").write(json.dumps(plan))
"""


class PlanTerminal(Terminal):
    """kestrel on a pseudo-terminal, where each answer starts a fresh screen to look at."""

    def type(self, line: str) -> None:
        """Answer; later expectations look only at what is printed from now on."""
        self.seen = ""
        super().type(line)


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
