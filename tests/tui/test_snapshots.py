"""The main screens as SVG snapshots: a finished session, a permission question, a plan, help.

The view under snapshot shows no clock, id or path: tool timings are off, the scripted model is
named by its file name, every turn reports the same usage, and the sandbox and verification are
set rather than found on the machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_kit import SIZE, Project, conversation, shows, turn, until

from kestrel.tui.app import KestrelApp
from kestrel.tui.dialogs import ApprovalScreen, PlanScreen, TextScreen

Compare = Callable[..., bool]
"""The `snap_compare` fixture: run the view, take its picture, compare it with the kept one."""
FIX = {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}
REPLY = (
    "Fixed: `add` now **adds**.\n\n"
    "- `calc.py`: the sign was wrong\n"
    "- nothing else changed\n\n"
    "```python\nassert add(2, 3) == 5\n```\n"
)


@pytest.fixture
def quiet(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The project with the sandbox and verification set, so the screen is the same anywhere."""
    monkeypatch.setenv("KESTREL_SANDBOX", "none")
    settings = Path.home() / ".config" / "kestrel" / "settings.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("[verify]\nenabled = false\n")
    return project


def still(view: KestrelApp) -> None:
    """No blinking cursor in the picture."""
    view.prompt_input.cursor_blink = False


def test_a_finished_session(quiet: Project, snap_compare: Compare) -> None:
    quiet.write_script([turn("Let me look at `add`.", ("edit_file", FIX)), turn(REPLY)])
    view = quiet.view("fix add", mode="accept-edits")

    async def finish(pilot: Pilot[int]) -> None:
        still(view)
        await until(pilot, lambda: "── done" in conversation(view), "the end of the session")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        await pilot.pause(0.3)

    assert snap_compare(view, terminal_size=SIZE, run_before=finish)


def test_a_permission_question(quiet: Project, snap_compare: Compare) -> None:
    quiet.write_script(
        [turn("Creating the file.", ("bash", {"command": "echo hi > made.txt"})), turn("Done.")]
    )
    view = quiet.view("make a file")

    async def question(pilot: Pilot[int]) -> None:
        still(view)
        await until(pilot, lambda: shows(view, ApprovalScreen, "#once"), "the question")
        await pilot.pause(0.3)

    assert snap_compare(view, terminal_size=SIZE, run_before=question)


def test_a_plan_to_decide(quiet: Project, snap_compare: Compare) -> None:
    steps = [
        {"id": "fix", "title": "Make add() add", "files": ["calc.py"], "checks": ["pytest"]},
        {"id": "notes", "title": "Write NOTES.md", "files": ["NOTES.md"], "depends_on": ["fix"]},
    ]
    quiet.write_script([turn("", ("propose_plan", {"summary": "Fix add.", "steps": steps}))])
    view = quiet.view("fix add", plan=True)

    async def plan(pilot: Pilot[int]) -> None:
        still(view)
        await until(pilot, lambda: shows(view, PlanScreen, "#edit"), "the plan")
        await pilot.pause(0.3)

    assert snap_compare(view, terminal_size=SIZE, run_before=plan)


def test_help(quiet: Project, snap_compare: Compare) -> None:
    commands = quiet.root / ".kestrel" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("Review the change for $ARGUMENTS.\n")
    view = quiet.view()

    async def help_screen(pilot: Pilot[int]) -> None:
        still(view)
        view.prompt_input.load_text("/help")
        await pilot.press("enter")
        await until(pilot, lambda: shows(view, TextScreen, "Static"), "the help")
        await pilot.pause(0.3)

    assert snap_compare(view, terminal_size=SIZE, run_before=help_screen)
