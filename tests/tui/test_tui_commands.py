"""The person's own commands in the view: `!command`, `/memory`, `/init`, `/compact`, and `@`
completing a definition from the index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Button
from tui_kit import SIZE, Project, conversation, send, shows, turn, until

from kestrel.agent.compaction import is_compacted
from kestrel.agent.state import replay
from kestrel.protocol.events import (
    ContextAdded,
    ContextCompacted,
    PermissionDecided,
    ToolCallRequested,
    ToolFinished,
)
from kestrel.protocol.messages import UserTurn
from kestrel.tui.app import KestrelApp
from kestrel.tui.dialogs import ApprovalScreen, ConfirmScreen, TextScreen
from kestrel.tui.init_cmd import MARKER
from kestrel.tui.prompt import CompletionHint


def _log(view: KestrelApp) -> list[object]:
    sid = view.driver.session_id
    assert sid is not None
    return [r.event for r in view.store.read(sid)]


def _screen_text(view: KestrelApp) -> str:
    return "\n".join(str(s.content) for s in view.screen.query("Static"))


async def test_a_person_s_command_is_asked_about_runs_and_reaches_the_model(
    project: Project,
) -> None:
    project.write_script([turn("Hello."), turn("I see the output.")])
    view = project.view("hi")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        await send(pilot, "!echo from-the-person > said.txt && cat said.txt")
        await until(pilot, lambda: shows(view, ApprovalScreen, "#once"), "the question")
        await pilot.press("y")
        title = "✓ ! echo from-the-person > said.txt && cat said.txt"
        await until(pilot, lambda: title in conversation(view), "the command's end")
        await until(pilot, lambda: not view.driver.busy, "the end of the command")
        assert "from-the-person" in conversation(view)  # Its output stays unfolded.
        await send(pilot, "what did it say?")
        await until(pilot, lambda: "I see the output." in conversation(view), "the follow-up")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        events = _log(view)
    assert (project.root / "said.txt").read_text() == "from-the-person\n"
    (requested,) = [e for e in events if isinstance(e, ToolCallRequested)]
    assert requested.call.id.startswith("person-") and requested.call.name == "bash"
    (decided,) = [e for e in events if isinstance(e, PermissionDecided)]
    assert decided.decision == "allow" and decided.decided_by == "user"
    (added,) = [e for e in events if isinstance(e, ContextAdded) and e.source == "shell"]
    assert "from-the-person" in added.text
    state = replay(view.store.read(view.driver.session_id or ""))
    told = [m.text for m in state.messages if isinstance(m, UserTurn)]
    # The command's output comes right before the next message: the model reads them together.
    assert "from-the-person" in told[-2] and told[-1] == "what did it say?"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_a_person_s_command_runs_in_the_session_s_sandbox(project: Project) -> None:
    outside = project.root.parent / "outside.txt"
    project.write_script([turn("Hello.")])
    view = project.view("hi", allow=("Bash(touch:*)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        assert view.driver.settings.sandbox == "bwrap"
        await send(pilot, f"!touch {outside} inside.txt")
        # A rule allows touch, but the classifier asks about a write outside the workspace.
        await until(pilot, lambda: shows(view, ApprovalScreen, "#once"), "the question")
        await pilot.press("y")
        await until(pilot, lambda: "✓ ! touch" in conversation(view), "the command's end")
        await until(pilot, lambda: not view.driver.busy, "the end of the command")
    # Allowed, yet outside the workspace it wrote only the sandbox's private /tmp.
    assert not outside.exists()
    assert (project.root / "inside.txt").exists()


async def test_a_denied_command_says_why_and_does_not_run(project: Project) -> None:
    project.write_script([turn("Hello.")])
    view = project.view("hi", deny=("Bash(rm:*)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        await send(pilot, "!rm calc.py")
        await until(pilot, lambda: "✗ ! rm calc.py" in conversation(view), "the refusal")
        await until(pilot, lambda: not view.driver.busy, "the end of the command")
        assert "✗ denied: rule" in conversation(view)
        events = _log(view)
    assert (project.root / "calc.py").exists()
    (decided,) = [e for e in events if isinstance(e, PermissionDecided)]
    assert (decided.decision, decided.decided_by) == ("deny", "rule")
    assert not [e for e in events if isinstance(e, ContextAdded) and e.source == "shell"]


async def test_bad_commands_get_a_message_not_a_run(project: Project) -> None:
    project.write_script([turn("Hello.")])
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "!ls")
        await until(pilot, lambda: "No session yet" in conversation(view), "no session")
        await send(pilot, "hi")
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        await send(pilot, "!   ")
        await until(pilot, lambda: "! needs a command" in conversation(view), "empty !")
        await send(pilot, "/memory frob")
        await until(pilot, lambda: "/memory frob is not a memory" in conversation(view), "bad")
        await send(pilot, "/memory rm zzzz")
        await until(pilot, lambda: "no entry with id 'zzzz'" in conversation(view), "no id")
        await send(pilot, "/memory add --scope team Use tabs.")
        await until(pilot, lambda: "the scope is project" in conversation(view), "bad scope")
        await send(pilot, "/init now")
        await until(pilot, lambda: "/init takes no arguments" in conversation(view), "init")
        events = _log(view)
    assert not [e for e in events if isinstance(e, ToolCallRequested)]


async def test_esc_stops_a_person_s_command(project: Project) -> None:
    project.write_script([turn("Hello."), turn("Next.")])
    view = project.view("hi", allow=("Bash(sleep:*)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        await send(pilot, "!sleep 30")
        await until(pilot, lambda: "● ! sleep 30" in conversation(view), "the running command")
        await send(pilot, "and now?")  # Waits for the command, as for any step.
        await until(pilot, lambda: "… and now?" in conversation(view), "the queued message")
        await pilot.press("escape")
        await until(pilot, lambda: "Next." in conversation(view), "the queued message's answer")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        events = _log(view)
    (ended,) = [e for e in events if isinstance(e, ToolFinished)]
    assert ended.interrupted and ended.call_id.startswith("person-")


async def test_memory_adds_lists_and_removes_entries_in_both_scopes(project: Project) -> None:
    project.write_script([turn("Noted.")])
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "/memory add Use httpx, not requests.")
        await until(pilot, lambda: "Remembered (" in conversation(view), "the project entry")
        await send(pilot, "/memory add --user Prefer pathlib.")
        await until(pilot, lambda: "user): Prefer pathlib." in conversation(view), "the user's")
        await send(pilot, "/memory")
        await until(pilot, lambda: shows(view, TextScreen, "Static"), "the list")
        listed = _screen_text(view)
        assert "[project]  Use httpx, not requests." in listed
        assert "[user]  Prefer pathlib." in listed
        entry_id = next(line.split()[0] for line in listed.splitlines() if "pathlib" in line)
        await pilot.press("escape")
        await send(pilot, f"/memory rm {entry_id}")
        await until(pilot, lambda: "Forgot (" in conversation(view), "the removal")
        await send(pilot, "a task")
        await until(pilot, lambda: "── done" in conversation(view), "the new session")
        events = _log(view)
    project_file = project.root / ".kestrel" / "memory.md"
    assert "- Use httpx, not requests." in project_file.read_text()
    user_file = Path.home() / ".config" / "kestrel" / "memory.md"
    assert "pathlib" not in user_file.read_text()
    (learned,) = [e for e in events if isinstance(e, ContextAdded) and e.source == "memory"]
    assert "Use httpx, not requests." in learned.text


async def test_init_writes_agents_md_from_the_repository_map(project: Project) -> None:
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "/init")
        await until(pilot, lambda: "Wrote AGENTS.md" in conversation(view), "the new file")
    written = (project.root / "AGENTS.md").read_text()
    assert written.startswith("# AGENTS.md")
    assert "## Commands" in written and MARKER in written
    assert "calc.py" in written and "def add(a, b)" in written


async def test_init_asks_before_changing_an_existing_agents_md(project: Project) -> None:
    agents = project.root / "AGENTS.md"
    agents.write_text("# Ours\n\nKeep this.\n")
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "/init")
        await until(pilot, lambda: shows(view, ConfirmScreen, "#yes"), "the question")
        assert "AGENTS.md is already there" in _screen_text(view)
        assert "calc.py" in _screen_text(view)  # What it would add.
        view.screen.query_one("#no", Button).press()
        await until(pilot, lambda: "left as it is" in conversation(view), "the answer")
        assert agents.read_text() == "# Ours\n\nKeep this.\n"
        await send(pilot, "/init")
        await until(pilot, lambda: shows(view, ConfirmScreen, "#yes"), "the question again")
        view.screen.query_one("#yes", Button).press()
        await until(pilot, lambda: "Updated the layout" in conversation(view), "the update")
        assert agents.read_text().startswith("# Ours\n\nKeep this.\n\n## Layout")
        await send(pilot, "/init")
        await until(pilot, lambda: "nothing to add" in conversation(view), "no change")
    assert agents.read_text().count(MARKER) == 1


async def test_compact_folds_the_older_turns_and_the_session_goes_on(project: Project) -> None:
    project.write_script([turn("One."), turn("Two."), turn("Three.")])
    view = project.view("first")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "One." in conversation(view), "the first answer")
        await until(pilot, lambda: not view.driver.busy, "the first step")
        await send(pilot, "second")
        await until(pilot, lambda: "Two." in conversation(view), "the second answer")
        await until(pilot, lambda: not view.driver.busy, "the second step")
        await send(pilot, "/compact")
        await until(pilot, lambda: "context compacted: 3" in conversation(view), "the compaction")
        await until(pilot, lambda: not view.driver.busy, "the end of the compaction")
        await send(pilot, "third")
        await until(pilot, lambda: "Three." in conversation(view), "the third answer")
        await until(pilot, lambda: not view.driver.busy, "the third step")
        events = _log(view)
    (compacted,) = [e for e in events if isinstance(e, ContextCompacted)]
    assert (compacted.dropped, compacted.kept) == (3, 1)
    state = replay(view.store.read(view.driver.session_id or ""))
    assert is_compacted(state.messages[0])


async def test_compact_with_nothing_to_fold_says_so(project: Project) -> None:
    project.write_script([turn("One.")])
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "/compact")
        await until(pilot, lambda: "nothing to compact" in conversation(view), "no session")
        await send(pilot, "first")
        await until(pilot, lambda: "── done" in conversation(view), "the first step")
        await send(pilot, "/compact")
        await until(pilot, lambda: "Nothing compacted" in conversation(view), "too short")
        events = _log(view)
    assert not [e for e in events if isinstance(e, ContextCompacted)]


async def test_at_completes_a_definition_from_the_index(project: Project) -> None:
    (project.root / "more.py").write_text("def add_all(xs):\n    return sum(xs)\n")
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        prompt = view.prompt_input
        await until(pilot, lambda: len(prompt.symbols) >= 2, "the index's names")
        prompt.focus()
        prompt.load_text("explain @add")
        prompt.move_cursor(prompt.document.end)
        await pilot.press("tab")
        await pilot.pause()
        assert prompt.text == "explain @calc.py:add"
        hint = view.query_one("#completions", CompletionHint)
        assert hint.display and "2 found" in str(hint.content)
        await pilot.press("tab")
        assert prompt.text == "explain @more.py:add_all"
        await pilot.press("shift+tab")
        assert prompt.text == "explain @calc.py:add"
        await pilot.press("enter")  # Takes the candidate; it does not send.
        await pilot.pause()
        assert prompt.text == "explain @calc.py:add " and not hint.display
        assert view.driver.session_id is None
        prompt.load_text("and @add_a")
        prompt.move_cursor(prompt.document.end)
        await pilot.press("tab")
        assert prompt.text == "and @more.py:add_all "
