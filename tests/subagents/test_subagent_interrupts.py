"""A parent stopped while its subagent runs: cancelled by the person, or killed and resumed."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from subagent_kit import Meeting, Parent, Scripts, children, make_parent

from kestrel.agent.agent_defs import builtin_agents, parse_definition
from kestrel.agent.session import reconcile
from kestrel.models.scripted import call, say
from kestrel.protocol.events import (
    SessionFinished,
    SubagentFinished,
    SubagentStarted,
    ToolFinished,
)
from kestrel.protocol.messages import ToolResultTurn
from kestrel.store.base import EventStore
from kestrel.store.memory import MemoryStore

PROMPT = "wait there"
HOLDER = "---\nname: holder\ndescription: Holds.\ntools: [meet]\n---\nCall meet.\n"


def _setup(root: Path, meeting: Meeting) -> Parent:
    definitions = {**builtin_agents(), "holder": parse_definition(HOLDER, source="holder.md")}
    scripts = Scripts(
        parent=[
            call("task", description="hold", prompt=PROMPT, agent="holder"),
            say("carrying on"),
        ],
        children={PROMPT: [call("meet"), say("never reached")]},
    )
    return make_parent(root, scripts, definitions=definitions, extra_tools=[meeting.tool()])


def _copy(store: EventStore, session_ids: list[str]) -> MemoryStore:
    """The logs as a process killed at this moment leaves them."""
    copy = MemoryStore()
    for session_id in session_ids:
        for record in store.read(session_id):
            copy.append(session_id, record.event)
    return copy


def test_cancelling_the_parent_interrupts_the_subagent(tmp_path: Path) -> None:
    meeting = Meeting(parties=1, release=asyncio.Event())
    parent = _setup(tmp_path, meeting)

    async def cancel_midway() -> None:
        running = asyncio.create_task(parent.loop.run())
        await meeting.arrived.wait()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    asyncio.run(cancel_midway())

    events = parent.events()
    result = next(e for e in events if isinstance(e, ToolFinished) and e.name == "task")
    assert result.interrupted and result.is_error
    ended = next(e for e in events if isinstance(e, SubagentFinished))
    assert ended.reason == "cancelled"
    assert ended.totals.turns == 1
    child = [r.event for r in parent.store.read(ended.child_session_id)]
    assert isinstance(child[-1], SessionFinished) and child[-1].reason == "cancelled"
    last = events[-1]
    assert isinstance(last, SessionFinished) and last.reason == "cancelled"
    assert last.totals.turns == 2  # the parent's turn and the subagent's


def test_a_resumed_parent_reports_the_lost_subagent_as_interrupted(tmp_path: Path) -> None:
    meeting = Meeting(parties=1, release=asyncio.Event())
    parent = _setup(tmp_path, meeting)
    parent_id = parent.loop.session_id

    async def kill_midway() -> MemoryStore:
        running = asyncio.create_task(parent.loop.run())
        await meeting.arrived.wait()
        started = next(e for e in parent.events() if isinstance(e, SubagentStarted))
        left = _copy(parent.store, [parent_id, started.child_session_id])
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        return left

    left = asyncio.run(kill_midway())
    resumed = make_parent(
        tmp_path,
        parent.scripts,
        store=left,
        session_id=parent_id,
        definitions=parent.runner.definitions,
        extra_tools=[Meeting(parties=1).tool()],
    )
    env = resumed.loop.environment
    reconcile(resumed.loop.state, resumed.loop.emit, resumed.loop.tools.kind, env.root)
    finished = asyncio.run(resumed.loop.run())

    assert finished.reason == "done"
    assert finished.final_text == "carrying on"
    events = resumed.events()
    result = next(e for e in events if isinstance(e, ToolFinished) and e.name == "task")
    assert result.is_error
    assert result.content.startswith(
        "[kestrel] Interrupted: the session stopped while this subagent was running"
    )
    ended = next(e for e in events if isinstance(e, SubagentFinished))
    assert ended.reason == "cancelled" and ended.totals.turns == 1
    assert finished.totals.turns == 3  # two of the parent's, one of the lost subagent's
    assert children(left, parent_id) == [ended.child_session_id]  # nothing ran it again
    child = [r.event for r in left.read(ended.child_session_id)]
    assert isinstance(child[-1], SessionFinished) and child[-1].reason == "cancelled"
    told = [
        m for m in resumed.loop.state.messages if isinstance(m, ToolResultTurn) and m.name == "task"
    ]
    assert len(told) == 1 and told[0].is_error


def test_a_report_finished_before_the_crash_is_read_back(tmp_path: Path) -> None:
    scripts = Scripts(
        parent=[call("task", description="look", prompt=PROMPT), say("carrying on")],
        children={PROMPT: [say("the report")]},
    )
    parent = make_parent(tmp_path, scripts)
    asyncio.run(parent.loop.run())
    started = next(e for e in parent.events() if isinstance(e, SubagentStarted))
    # The process died after the subagent's session ended, before the parent heard of it.
    left = MemoryStore()
    for record in parent.records():
        if isinstance(record.event, SubagentFinished):
            break
        left.append(parent.loop.session_id, record.event)
    for record in parent.store.read(started.child_session_id):
        left.append(started.child_session_id, record.event)

    resumed = make_parent(tmp_path, scripts, store=left, session_id=parent.loop.session_id)
    reconcile(resumed.loop.state, resumed.loop.emit, resumed.loop.tools.kind, tmp_path)
    finished = asyncio.run(resumed.loop.run())

    assert finished.reason == "done"
    events = resumed.events()
    result = next(e for e in events if isinstance(e, ToolFinished) and e.name == "task")
    assert (result.content, result.is_error) == ("the report", False)
    ended = [e for e in events if isinstance(e, SubagentFinished)]
    assert [(e.reason, e.totals.turns) for e in ended] == [("done", 1)]
    assert children(left, parent.loop.session_id) == [started.child_session_id]
