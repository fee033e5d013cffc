"""Several `task` calls of one reply run at the same time, each in its own child session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from subagent_kit import Meeting, Scripts, children, make_parent

from kestrel.agent.agent_defs import builtin_agents, parse_definition
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import SubagentFinished, SubagentStarted, ToolFinished

WAITER = """---
name: waiter
description: Waits for its sibling.
tools: [meet]
---
Call meet, then report.
"""


def _two_tasks() -> ScriptedTurn:
    calls = tuple(
        ("task", json.dumps({"description": f"wait {n}", "prompt": f"p{n}", "agent": "waiter"}))
        for n in (1, 2)
    )
    return ScriptedTurn(tool_calls=calls)


def test_two_subagents_of_one_reply_overlap(tmp_path: Path) -> None:
    meeting = Meeting(parties=2)
    definitions = {**builtin_agents(), "waiter": parse_definition(WAITER, source="waiter.md")}
    scripts = Scripts(
        parent=[_two_tasks(), say("both reported")],
        children={
            "p1": [call("meet"), say("report one")],
            "p2": [call("meet"), say("report two")],
        },
    )
    parent = make_parent(tmp_path, scripts, definitions=definitions, extra_tools=[meeting.tool()])

    async def go() -> None:
        # Each subagent's `meet` returns only once both wait in it together.
        finished = await parent.loop.run()
        assert finished.reason == "done"

    asyncio.run(go())

    kids = children(parent.store, parent.loop.session_id)
    assert len(kids) == 2
    for kid in kids:
        met = [
            r.event.content
            for r in parent.store.read(kid)
            if isinstance(r.event, ToolFinished) and r.event.name == "meet"
        ]
        assert met == ["met"]
    events = parent.events()
    kinds = [e.type for e in events if isinstance(e, SubagentStarted | SubagentFinished)]
    assert kinds == [
        "subagent_started",
        "subagent_started",
        "subagent_finished",
        "subagent_finished",
    ]
    results = {
        e.call_id: e.content for e in events if isinstance(e, ToolFinished) and e.name == "task"
    }
    assert sorted(results.values()) == ["report one", "report two"]
    started = {e.call_id: e.child_session_id for e in events if isinstance(e, SubagentStarted)}
    assert sorted(started.values()) == sorted(kids)


def test_a_lone_meeting_says_so(tmp_path: Path) -> None:
    """The proof above can fail: one caller alone at the meeting is told `alone`."""
    meeting = Meeting(parties=2, patience_s=0.05)
    assert asyncio.run(meeting.meet()) == "alone"
