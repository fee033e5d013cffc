"""The change a session leaves in its overlay, reviewed in the view; custom commands; subagents;
NO_COLOR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Button, Input, Markdown
from tui_kit import BUGGY, SIZE, Project, conversation, send, shows, turn, until

from kestrel.protocol.events import ChangesApplied, ChangesReady, UserMessage
from kestrel.tui.blocks import SubagentBlock
from kestrel.tui.dialogs import ChangeScreen
from kestrel.tui.transcript import Transcript

FIX = {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}


async def test_a_change_is_applied_from_the_review_dialog(project: Project) -> None:
    project.write_script([turn("", ("edit_file", FIX)), turn("Fixed.")])
    view = project.view("fix add", workspace="overlay", mode="default", allow=("Edit(calc.py)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(view, ChangeScreen, "#apply"), "the review")
        assert (project.root / "calc.py").read_text() == BUGGY  # Only in the overlay so far.
        view.screen.query_one("#apply", Button).press()
        await until(pilot, lambda: "applied to the checkout" in conversation(view), "the apply")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        sid = view.driver.session_id
    assert sid is not None
    assert "return a + b" in (project.root / "calc.py").read_text()
    events = [r.event for r in view.store.read(sid)]
    assert any(isinstance(e, ChangesReady) for e in events)
    (applied,) = [e for e in events if isinstance(e, ChangesApplied)]
    assert applied.outcome == "applied" and applied.written == ("calc.py",)


async def test_a_rejected_change_sends_the_feedback_and_stays_unapplied(project: Project) -> None:
    project.write_script([turn("", ("edit_file", FIX)), turn("Fixed."), turn("Understood.")])
    view = project.view("fix add", workspace="overlay", allow=("Edit(calc.py)",))
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shows(view, ChangeScreen, "#reject"), "the review")
        view.screen.query_one("#feedback", Input).value = "keep the old name"
        view.screen.query_one("#reject", Button).press()
        await until(pilot, lambda: "Understood." in conversation(view), "the answer")
        await until(pilot, lambda: shows(view, ChangeScreen, "#apply"), "the second review")
        view.screen.query_one("#later", Button).press()
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        sid = view.driver.session_id
    assert sid is not None
    assert (project.root / "calc.py").read_text() == BUGGY
    messages = [r.event.text for r in view.store.read(sid) if isinstance(r.event, UserMessage)]
    assert messages == ["fix add", "keep the old name"]


async def test_a_custom_command_sends_its_prompt(project: Project) -> None:
    commands = project.root / ".kestrel" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text("Say hello to $ARGUMENTS.\n")
    project.write_script([turn("Hello, Ada.")])
    view = project.view()
    async with view.run_test(size=SIZE) as pilot:
        await send(pilot, "/greet Ada")
        await until(pilot, lambda: "Hello, Ada." in conversation(view), "the answer")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        sid = view.driver.session_id
    assert sid is not None
    messages = [r.event.text for r in view.store.read(sid) if isinstance(r.event, UserMessage)]
    assert messages == ["Say hello to Ada.\n"]


async def test_no_color_turns_the_colours_off(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    view = project.view()
    async with view.run_test(size=SIZE):
        assert view.no_color
        assert view.theme == "ansi-dark"  # The terminal's own colours otherwise.


async def test_a_subagent_is_nested_inside_its_task_call(project: Project) -> None:
    task = {"description": "find add", "prompt": "Where is add?", "agent": "explore"}
    project.write_script([turn("", ("task", task)), turn("add is in calc.py.")])
    child = project.root.parent / "child.json"
    child.write_text(
        json.dumps([turn("", ("grep", {"pattern": "def add"})), turn("add is at calc.py:1.")])
    )
    settings = Path.home() / ".config" / "kestrel" / "settings.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(f"[models]\nfast = [{json.dumps(f'scripted:{child}')}]\n")
    view = project.view("find add")
    async with view.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "add is in calc.py." in conversation(view), "the answer")
        await until(pilot, lambda: not view.driver.busy, "the end of the step")
        await until(pilot, lambda: bool(view.query(SubagentBlock)), "the subagent")
        (nested,) = view.query(SubagentBlock)
        inner = nested.query_one(Transcript)
        await until(pilot, lambda: "add is at calc.py:1." in _text(inner), "the child's answer")
        assert "explore: find add · done" in nested.title
        assert "grep(pattern='def add')" in _text(inner)


def _text(transcript: Transcript) -> str:
    return "\n".join(
        w.source if isinstance(w, Markdown) else getattr(w, "title", "")
        for w in transcript.query("*")
    )
