"""Plan mode and the task list through the whole loop, with a scripted model.

A plan is proposed read-only, edited and approved, and the model then carries it out; a rejected
plan goes back to the model with the reason; the task list survives a resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loop_kit import make_loop, transcript

from kestrel.agent.loop import AgentLoop
from kestrel.agent.planning import Approve, Reject, record_decision
from kestrel.agent.prompt import task_list_block
from kestrel.models.scripted import ScriptedTurn, call
from kestrel.protocol.events import (
    PermissionMode,
    PlanDecided,
    PlanProposed,
    PlanStep,
    Record,
    TodoItem,
    TodoUpdated,
    ToolFinished,
)
from kestrel.protocol.messages import ModelRequest, StreamPart, ToolResultTurn, UserTurn
from kestrel.store.memory import MemoryStore
from kestrel.tools.plan import ProposePlan
from kestrel.tools.registry import ToolRegistry, default_tools
from kestrel.tools.todo import Todo

STEPS = [
    {"id": "greet", "title": "Add greet()", "files": ["greet.py"], "checks": ["python greet.py"]},
    {"id": "docs", "title": "Document greet()", "files": ["NOTES.md"], "depends_on": ["greet"]},
]


@dataclass
class Recorder:
    """Wraps the loop's model streamer and keeps every request it is sent."""

    inner: object
    requests: list[ModelRequest] = field(default_factory=list)

    def __call__(
        self, request: ModelRequest, *args: object, **kwargs: object
    ) -> AsyncIterator[StreamPart]:
        self.requests.append(request)
        return self.inner(request, *args, **kwargs)  # type: ignore[operator,no-any-return]


def planning_loop(
    root: Path,
    turns: Sequence[ScriptedTurn],
    *,
    store: MemoryStore | None = None,
    mode: PermissionMode = "plan",
    session_id: str | None = None,
) -> tuple[AgentLoop, Recorder]:
    """A loop with the planning tools whose model requests are recorded."""
    loop = make_loop(root, turns, mode=mode, store=store)
    if session_id is not None:  # Continue an existing session instead of the new one.
        loop = AgentLoop(
            store=loop.store,
            session_id=session_id,
            streamer=loop.streamer,
            tools=loop.tools,
            environment=loop.environment,
            approver=loop.approver,
            config=loop.config,
        )
    loop.tools = ToolRegistry([*default_tools(), Todo(), ProposePlan()])
    recorder = Recorder(loop.streamer)
    loop.streamer = recorder
    return loop, recorder


def events_of(records: Sequence[Record], kind: type) -> list[object]:
    return [r.event for r in records if isinstance(r.event, kind)]


def last_text(request: ModelRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, UserTurn | ToolResultTurn)
    return last.text if isinstance(last, UserTurn) else last.content


def test_a_plan_is_proposed_edited_approved_and_followed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("A tiny project.\n")
    turns = [
        call("list_files", "Looking around first."),
        call("write_file", path="greet.py", content="too early\n"),  # plan mode refuses it
        call("propose_plan", summary="Add greet, then document it.", steps=STEPS),
        # After the approval the model follows the edited plan and keeps the list current.
        call(
            "todo",
            items=[
                {"id": "greet", "text": "Add greet() printing hello", "status": "in_progress"},
                {"id": "docs", "text": "Document greet() in GREETING.md"},
            ],
        ),
        call("write_file", path="greet.py", content="print('hello')\n"),
        call(
            "todo",
            items=[
                {"id": "greet", "text": "Add greet() printing hello", "status": "done"},
                {"id": "docs", "text": "Document greet() in GREETING.md", "status": "in_progress"},
            ],
        ),
        call("write_file", path="GREETING.md", content="greet.py prints hello.\n"),
        call(
            "todo",
            items=[
                {"id": "greet", "text": "Add greet() printing hello", "status": "done"},
                {"id": "docs", "text": "Document greet() in GREETING.md", "status": "done"},
            ],
        ),
        ScriptedTurn(text="Both steps are done."),
    ]
    loop, recorder = planning_loop(root, turns)

    stopped = asyncio.run(loop.run())
    assert stopped.reason == "plan"
    assert not (root / "greet.py").exists()
    (proposed,) = events_of(loop.store.read(loop.session_id), PlanProposed)
    assert isinstance(proposed, PlanProposed) and proposed.summary == "Add greet, then document it."
    assert loop.state.plan == proposed

    # The person edits the second step (another file) before approving.
    edited = (
        PlanStep(id="greet", title="Add greet() printing hello", files=("greet.py",)),
        PlanStep(
            id="docs",
            title="Document greet() in GREETING.md",
            files=("GREETING.md",),
            depends_on=("greet",),
        ),
    )
    message = record_decision(
        loop.state, loop.emit, Approve(mode="accept-edits", steps=edited, summary=proposed.summary)
    )
    assert loop.state.permission_mode == "accept-edits" and loop.state.plan is None
    assert loop.state.todos == (
        TodoItem(id="greet", text="Add greet() printing hello"),
        TodoItem(id="docs", text="Document greet() in GREETING.md"),
    )
    assert f"The person approved plan {proposed.plan_id} after editing it." in message
    assert "2. [docs] Document greet() in GREETING.md\n   files: GREETING.md" in message

    finished = asyncio.run(loop.send(message))
    assert finished.reason == "done" and finished.final_text == "Both steps are done."

    records = loop.store.read(loop.session_id)
    assert transcript(records) == [
        "session started",
        "user message",
        "model request started",
        "model completed",
        "call list_files",
        "allow by mode",
        "tool started",
        "result list_files",
        "model request started",
        "model completed",
        "call write_file",
        "deny by mode",
        "result write_file error",
        "model request started",
        "model completed",
        "call propose_plan",
        "allow by mode",
        "tool started",
        "plan proposed",
        "result propose_plan",
        "finished plan",
        "plan decided",
        "todo updated",
        "user message",
        *["model request started", "model completed", "call todo", "allow by mode"],
        *["tool started", "todo updated", "result todo"],
        *["model request started", "model completed", "call write_file", "allow by mode"],
        *["tool started", "file changed", "result write_file"],
        *["model request started", "model completed", "call todo", "allow by mode"],
        *["tool started", "todo updated", "result todo"],
        *["model request started", "model completed", "call write_file", "allow by mode"],
        *["tool started", "file changed", "result write_file"],
        *["model request started", "model completed", "call todo", "allow by mode"],
        *["tool started", "todo updated", "result todo"],
        "model request started",
        "model completed",
        "finished done",
    ]
    decided = events_of(records, PlanDecided)
    assert decided == [
        PlanDecided(
            plan_id=proposed.plan_id,
            decision="approved",
            steps=edited,
            edited=True,
            permission_mode="accept-edits",
        )
    ]
    lists = [e for e in events_of(records, TodoUpdated) if isinstance(e, TodoUpdated)]
    assert [e.source for e in lists] == ["plan", "model", "model", "model"]
    assert [[i.status for i in e.items] for e in lists] == [
        ["pending", "pending"],
        ["in_progress", "pending"],
        ["done", "in_progress"],
        ["done", "done"],
    ]
    assert (root / "greet.py").read_text() == "print('hello')\n"
    assert (root / "GREETING.md").read_text() == "greet.py prints hello.\n"
    assert not (root / "NOTES.md").exists()  # The step was edited to another file.

    # Every request after the approval showed the current list, word for word, at its end.
    after = recorder.requests[3:]
    current = [0, 1, 1, 2, 2, 3]  # Which list was current when each request was sent.
    assert len(after) == len(current)
    for request, index in zip(after, current, strict=True):
        assert last_text(request).endswith("\n\n" + task_list_block(lists[index].items))
        assert sum(str(m).count("<task-list>") for m in request.messages) == 1
    assert not any("<task-list>" in last_text(r) for r in recorder.requests[:3])


def test_a_rejected_plan_goes_back_to_the_model_with_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    turns = [
        call("propose_plan", steps=[{"id": "a", "title": "Rewrite everything"}]),
        call("propose_plan", steps=[{"id": "a", "title": "Change one function"}]),
    ]
    loop, recorder = planning_loop(root, turns)
    assert asyncio.run(loop.run()).reason == "plan"
    first = loop.state.plan
    assert first is not None

    message = record_decision(loop.state, loop.emit, Reject(reason="too big; touch one function"))
    assert loop.state.plan is None and loop.state.permission_mode == "plan"
    assert asyncio.run(loop.send(message)).reason == "plan"

    seen = last_text(recorder.requests[-1])
    assert f"The person rejected plan {first.plan_id}: too big; touch one function" in seen
    assert "propose a new plan with propose_plan" in seen
    second = loop.state.plan
    assert second is not None and second.plan_id != first.plan_id
    assert second.steps == (PlanStep(id="a", title="Change one function"),)
    rejected = events_of(loop.store.read(loop.session_id), PlanDecided)
    assert rejected == [
        PlanDecided(
            plan_id=first.plan_id, decision="rejected", reason="too big; touch one function"
        )
    ]
    assert loop.state.todos == ()  # A rejection leaves the task list alone.


def test_the_task_list_survives_a_resume(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    items = [
        {"id": "1", "text": "find the bug", "status": "done"},
        {"id": "2", "text": "fix it", "status": "in_progress"},
    ]
    store = MemoryStore()
    turns = [call("todo", items=items), ScriptedTurn(text="Listed.")]
    first, _ = planning_loop(root, turns, store=store, mode="bypass")
    assert asyncio.run(first.run()).reason == "done"
    expected = (
        TodoItem(id="1", text="find the bug", status="done"),
        TodoItem(id="2", text="fix it", status="in_progress"),
    )
    assert first.state.todos == expected

    # A new process replays the log: the list is back, and the model is shown it again.
    turns = [*turns, call("todo", items=items), ScriptedTurn(text="Still on it.")]
    again, recorder = planning_loop(root, turns, store=store, session_id=first.session_id)
    assert again.state.todos == expected
    assert asyncio.run(again.send("carry on")).reason == "done"
    assert last_text(recorder.requests[0]) == f"carry on\n\n{task_list_block(expected)}"


def test_malformed_planning_calls_are_tool_errors_and_change_nothing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    turns = [
        call(
            "todo",
            items=[
                {"id": "1", "text": "a", "status": "in_progress"},
                {"id": "2", "text": "b", "status": "in_progress"},
            ],
        ),
        call(
            "propose_plan",
            steps=[
                {"id": "a", "title": "A", "depends_on": ["b"]},
                {"id": "b", "title": "B", "depends_on": ["a"]},
            ],
        ),
        call("propose_plan", steps=[{"id": "a", "title": "A", "depends_on": ["nope"]}]),
        ScriptedTurn(text="I will think again."),
    ]
    loop, _ = planning_loop(root, turns)
    finished = asyncio.run(loop.run())
    assert finished.reason == "done"  # No plan was proposed, so nothing waits.
    records = loop.store.read(loop.session_id)
    results = [e for e in events_of(records, ToolFinished) if isinstance(e, ToolFinished)]
    assert [r.is_error for r in results] == [True, True, True]
    assert "at most one may be" in results[0].content
    assert "cycle: 'a' -> 'b' -> 'a'" in results[1].content
    assert "depends on 'nope', which is not a step of this plan" in results[2].content
    assert events_of(records, TodoUpdated) == [] and events_of(records, PlanProposed) == []
    assert loop.state.todos == () and loop.state.plan is None
