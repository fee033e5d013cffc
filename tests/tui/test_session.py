"""Whole sessions in the view: a question answered, a plan edited, a step stopped, a rewind,
a resume."""

from __future__ import annotations

import json

from textual.widgets import Button, OptionList, TextArea
from tui_kit import SIZE, Project, conversation, send, shows, turn, until

from kestrel.protocol.events import (
    ApprovalDecided,
    CancelRequested,
    PermissionDecided,
    PlanDecided,
    Rewound,
    SessionFinished,
    UserMessage,
)
from kestrel.tui.dialogs import ApprovalScreen, PickerScreen, PlanScreen
from kestrel.tui.review import checkpoints_in


async def test_a_command_is_allowed_in_the_dialog_and_runs(project: Project) -> None:
    project.write_script(
        [
            turn("Creating the file.", ("bash", {"command": "echo hi > made.txt"})),
            turn("All **done**."),
        ]
    )
    view = project.view("make a file")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(view, ApprovalScreen, "#once"), "the question")
        assert "$ echo hi > made.txt" in str(view.screen.query_one(".subject").content)
        await pilot.press("y")
        await until(pilot, lambda: "── done" in conversation(view), "the end of the step")
        text = conversation(view)
        assert "> make a file" in text
        assert "Creating the file." in text and "All **done**." in text
        assert "✓ bash(command='echo hi > made.txt')" in text
        sid = view.driver.session_id
        assert sid is not None
    events = [r.event for r in view.store.read(sid)]
    (answer,) = [e for e in events if isinstance(e, ApprovalDecided)]
    assert (answer.allow, answer.scope, answer.by) == (True, "once", "terminal")
    (decided,) = [e for e in events if isinstance(e, PermissionDecided)]
    assert decided.decision == "allow"
    assert (project.root / "made.txt").read_text() == "hi\n"


async def test_a_plan_is_edited_then_approved(project: Project) -> None:
    steps = [
        {"id": "fix", "title": "Make add() add", "files": ["calc.py"]},
        {"id": "notes", "title": "Write NOTES.md", "files": ["NOTES.md"], "depends_on": ["fix"]},
    ]
    fix = {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}
    project.write_script(
        [
            turn("", ("propose_plan", {"summary": "Fix add.", "steps": steps})),
            turn("", ("edit_file", fix)),
            turn("Followed the plan."),
        ]
    )
    view = project.view("fix add", plan=True, mode="accept-edits")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(view, PlanScreen, "#edit"), "the plan")
        view.screen.query_one("#edit", Button).press()
        await pilot.pause()
        editor = view.screen.query_one("#editor", TextArea)
        edited = json.loads(editor.text)
        edited["steps"] = edited["steps"][:1]  # The person drops the notes step.
        editor.load_text(json.dumps(edited))
        view.screen.query_one("#approve-edited", Button).press()
        await until(pilot, lambda: "Followed the plan." in conversation(view), "the plan's work")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        assert "plan approved (edited)" in conversation(view)
        sid = view.driver.session_id
        assert sid is not None
    (decided,) = [r.event for r in view.store.read(sid) if isinstance(r.event, PlanDecided)]
    assert decided.decision == "approved" and decided.edited
    assert [s.id for s in decided.steps] == ["fix"]
    assert decided.permission_mode == "accept-edits"
    assert "return a + b" in (project.root / "calc.py").read_text()


async def test_esc_stops_the_step_and_the_queued_message_follows(project: Project) -> None:
    project.write_script(
        [
            turn("Waiting.", ("bash", {"command": "sleep 30"})),
            turn("Second answer."),
        ]
    )
    view = project.view("wait a while", allow=("Bash(sleep:*)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "● bash(command='sleep 30')" in conversation(view), "the call")
        await pilot.click("#prompt")
        await pilot.press(*"and now?", "enter")  # Typed while the agent works: it waits.
        await until(pilot, lambda: "… and now?" in conversation(view), "the queued message")
        assert view.driver.queue == ["and now?"]
        await pilot.press("escape")
        await until(pilot, lambda: "Second answer." in conversation(view), "the follow-up")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        sid = view.driver.session_id
        assert sid is not None
    events = [r.event for r in view.store.read(sid)]
    asked = [e for e in events if isinstance(e, CancelRequested)]
    assert [a.by for a in asked] == ["terminal"]
    reasons = [e.reason for e in events if isinstance(e, SessionFinished)]
    assert reasons == ["cancelled", "done"]
    messages = [e.text for e in events if isinstance(e, UserMessage)]
    assert messages == ["wait a while", "and now?"]


async def test_rewind_restores_the_files_of_a_checkpoint(project: Project) -> None:
    project.write_script(
        [
            turn("", ("write_file", {"path": "a.txt", "content": "one\n"})),
            turn("Wrote it."),
            turn("", ("write_file", {"path": "a.txt", "content": "two\n"})),
            turn("Changed it."),
        ]
    )
    view = project.view("write a", mode="accept-edits")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "Wrote it." in conversation(view), "the first step")
        await until(pilot, lambda: not view.driver.busy, "the end of the first step")
        await send(pilot, "again")
        await until(pilot, lambda: "Changed it." in conversation(view), "the second step")
        await until(pilot, lambda: not view.driver.busy, "the end of the second step")
        assert (project.root / "a.txt").read_text() == "two\n"
        sid = view.driver.session_id
        assert sid is not None
        found = checkpoints_in(view.store.read(sid))
        first = next(i for i, c in enumerate(found) if "A a.txt" in c.files)
        await send(pilot, "/rewind")
        await until(pilot, lambda: shows(view, PickerScreen, "OptionList"), "the picker")
        view.screen.query_one(OptionList).highlighted = first
        await pilot.press("enter")
        await until(pilot, lambda: "rewound" in conversation(view), "the rewind")
        assert (project.root / "a.txt").read_text() == "one\n"
    (rewound,) = [r.event for r in view.store.read(sid) if isinstance(r.event, Rewound)]
    assert rewound.checkpoint_id == found[first].checkpoint_id


async def test_resume_picks_an_earlier_session_and_continues_it(project: Project) -> None:
    project.write_script([turn("First answer."), turn("Second answer.")])
    first = project.view("hello")
    async with first.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "First answer." in conversation(first), "the answer")
        await until(pilot, lambda: not first.driver.busy, "the end of the step")
        sid = first.driver.session_id
    later = project.view()
    async with later.run_test(size=SIZE) as pilot:
        await send(pilot, "/resume")
        await until(pilot, lambda: shows(later, PickerScreen, "OptionList"), "the picker")
        await pilot.press("enter")
        await until(pilot, lambda: "First answer." in conversation(later), "the old session")
        await send(pilot, "and then?")
        await until(pilot, lambda: "Second answer." in conversation(later), "the follow-up")
        await until(pilot, lambda: not later.driver.busy, "the end of the step")
        assert later.driver.session_id == sid
    assert sid is not None
    messages = [r.event.text for r in later.store.read(sid) if isinstance(r.event, UserMessage)]
    assert messages == ["hello", "and then?"]


async def test_a_message_while_a_plan_waits_rejects_it(project: Project) -> None:
    steps = [{"id": "fix", "title": "Make add() add", "files": ["calc.py"]}]
    propose = ("propose_plan", {"summary": "Fix add.", "steps": steps})
    project.write_script([turn("", propose), turn("", propose)])
    view = project.view("fix add", plan=True)
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(view, PlanScreen, "#edit"), "the plan")
        await pilot.press("escape")  # Decide later.
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        await send(pilot, "smaller steps, please")
        await until(pilot, lambda: shows(view, PlanScreen, "#edit"), "the second plan")
        sid = view.driver.session_id
        assert sid is not None
        decided = [r.event for r in view.store.read(sid) if isinstance(r.event, PlanDecided)]
        assert [(d.decision, d.reason) for d in decided] == [("rejected", "smaller steps, please")]


async def test_a_resumed_session_asks_about_the_plan_it_waits_on(project: Project) -> None:
    steps = [{"id": "fix", "title": "Make add() add", "files": ["calc.py"]}]
    project.write_script(
        [turn("", ("propose_plan", {"summary": "Fix add.", "steps": steps})), turn("On it.")]
    )
    first = project.view("fix add", plan=True)
    async with first.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(first, PlanScreen, "#edit"), "the plan")
        await pilot.press("escape")  # Left waiting; the view is closed.
        await until(pilot, lambda: not first.driver.busy, "the end of the step")
        sid = first.driver.session_id
    assert sid is not None
    later = project.view(resume=sid)
    async with later.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(later, PlanScreen, "#approve"), "the plan again")
        later.screen.query_one("#approve", Button).press()
        await until(pilot, lambda: "On it." in conversation(later), "the work")
    decided = [r.event for r in later.store.read(sid) if isinstance(r.event, PlanDecided)]
    assert [d.decision for d in decided] == ["approved"]
