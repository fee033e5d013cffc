"""A subagent spends the parent's budget and no more, and has only the tools it is given."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from subagent_kit import Scripts, make_parent

from kestrel.agent.agent_defs import builtin_agents, parse_definition
from kestrel.agent.subagent_limits import child_limits, narrower_mode
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import (
    Limits,
    PermissionDecided,
    SessionFinished,
    SessionStarted,
    SubagentFinished,
    SubagentStarted,
    ToolFinished,
    Totals,
)

PROMPT = "look around"


def _costing(turn: ScriptedTurn, cost: float) -> ScriptedTurn:
    usage = {"input_tokens": 10, "output_tokens": 1, "cost_usd": cost}
    return ScriptedTurn(text=turn.text, tool_calls=turn.tool_calls, usage=usage)


def test_a_parent_budget_stops_the_child_and_then_the_parent(tmp_path: Path) -> None:
    task = call("task", description="look", prompt=PROMPT)
    scripts = Scripts(
        parent=[_costing(task, 0.4), _costing(say("never reached"), 0.4)],
        children={PROMPT: [_costing(call("list_files"), 0.3) for _ in range(5)]},
    )
    parent = make_parent(tmp_path, scripts, limits=Limits(max_cost_usd=1.0))
    finished = asyncio.run(parent.loop.run())

    events = parent.events()
    child_id = next(e for e in events if isinstance(e, SubagentStarted)).child_session_id
    child = [r.event for r in parent.store.read(child_id)]
    first, last = child[0], child[-1]
    assert isinstance(first, SessionStarted) and isinstance(last, SessionFinished)
    assert first.limits.max_cost_usd == pytest.approx(0.6)
    assert first.limits.max_turns == 30  # explore's own limit; the parent has none
    assert last.reason == "budget"
    assert last.totals.cost_usd == pytest.approx(0.6)
    ended = next(e for e in events if isinstance(e, SubagentFinished))
    assert ended.reason == "budget"
    result = next(e for e in events if isinstance(e, ToolFinished) and e.name == "task")
    assert result.is_error and "(budget: cost budget spent" in result.content
    assert finished.reason == "budget"
    assert finished.totals.cost_usd == pytest.approx(1.0)
    assert len(scripts.requests_for("fix it")) == 1  # the parent never asked again


def test_no_subagent_starts_once_the_budget_is_spent(tmp_path: Path) -> None:
    task = call("task", description="look", prompt=PROMPT)
    scripts = Scripts(parent=[_costing(task, 1.0), say("x")], children={PROMPT: [say("hi")]})
    parent = make_parent(tmp_path, scripts, limits=Limits(max_cost_usd=1.0))
    asyncio.run(parent.loop.run())
    result = next(e for e in parent.events() if isinstance(e, ToolFinished))
    assert result.is_error
    assert result.content == "no subagent started: the session's cost budget is spent"
    assert not any(isinstance(e, SubagentStarted) for e in parent.events())


def test_siblings_share_what_is_left(tmp_path: Path) -> None:
    calls = tuple(
        ("task", json.dumps({"description": f"look {n}", "prompt": f"p{n}"})) for n in (1, 2)
    )
    scripts = Scripts(
        parent=[ScriptedTurn(tool_calls=calls), say("x")],
        children={f"p{n}": [_costing(call("list_files"), 0.25) for _ in range(10)] for n in (1, 2)},
    )
    parent = make_parent(tmp_path, scripts, limits=Limits(max_cost_usd=1.0))
    finished = asyncio.run(parent.loop.run())
    spent = [e.totals.cost_usd for e in parent.events() if isinstance(e, SubagentFinished)]
    # Each sibling was held to what the parent and the other had left, turn by turn.
    assert sum(spent) == pytest.approx(1.0)
    assert finished.reason == "budget"


def test_child_limits_are_what_the_parent_has_left() -> None:
    limits = Limits(max_turns=10, max_tokens=1000, max_cost_usd=2.0, max_wall_s=60)
    spent = Totals(turns=4, input_tokens=300, output_tokens=100, cost_usd=0.5)
    assert child_limits(limits, spent, max_turns=3, wall_left=20.0) == Limits(
        max_turns=3, max_tokens=600, max_cost_usd=1.5, max_wall_s=20.0
    )
    assert child_limits(Limits(), spent, max_turns=None, wall_left=None) == Limits()
    over = Totals(turns=12)
    assert child_limits(limits, over, max_turns=None, wall_left=None).max_turns == 0


def test_the_mode_is_never_wider_than_the_parents() -> None:
    assert narrower_mode("bypass", "plan") == "plan"
    assert narrower_mode("plan", "bypass") == "plan"
    assert narrower_mode(None, "accept-edits") == "accept-edits"
    assert narrower_mode("accept-edits", "default") == "default"


def test_explore_cannot_write(tmp_path: Path) -> None:
    scripts = Scripts(
        parent=[call("task", description="look", prompt=PROMPT), say("ok")],
        children={PROMPT: [call("write_file", path="x.txt", content="hi"), say("tried")]},
    )
    parent = make_parent(tmp_path, scripts)
    asyncio.run(parent.loop.run())
    child_id = next(e for e in parent.events() if isinstance(e, SubagentStarted)).child_session_id
    refused = next(
        r.event for r in parent.store.read(child_id) if isinstance(r.event, ToolFinished)
    )
    assert refused.is_error
    assert refused.content.startswith("unknown tool 'write_file'; available tools: read_file")
    assert not (tmp_path / "x.txt").exists()


def test_a_writer_defined_read_only_is_refused_by_its_mode(tmp_path: Path) -> None:
    text = (
        "---\nname: scribe\ndescription: d\ntools:\n  - write_file\npermission-mode: plan\n---\nx"
    )
    definitions = {**builtin_agents(), "scribe": parse_definition(text, source="scribe.md")}
    scripts = Scripts(
        parent=[call("task", description="w", prompt=PROMPT, agent="scribe"), say("ok")],
        children={PROMPT: [call("write_file", path="x.txt", content="hi"), say("tried")]},
    )
    parent = make_parent(tmp_path, scripts, definitions=definitions, mode="bypass")
    asyncio.run(parent.loop.run())
    child_id = next(e for e in parent.events() if isinstance(e, SubagentStarted)).child_session_id
    child = [r.event for r in parent.store.read(child_id)]
    decided = next(e for e in child if isinstance(e, PermissionDecided))
    assert (decided.decision, decided.decided_by) == ("deny", "mode")
    assert not (tmp_path / "x.txt").exists()


def test_a_plan_mode_parent_keeps_a_bypass_subagent_read_only(tmp_path: Path) -> None:
    text = "---\nname: scribe\ndescription: d\ntools: write_file\npermission-mode: bypass\n---\nx"
    definitions = {**builtin_agents(), "scribe": parse_definition(text, source="scribe.md")}
    scripts = Scripts(
        parent=[call("task", description="w", prompt=PROMPT, agent="scribe"), say("ok")],
        children={PROMPT: [call("write_file", path="x.txt", content="hi"), say("tried")]},
    )
    parent = make_parent(tmp_path, scripts, definitions=definitions, mode="plan")
    asyncio.run(parent.loop.run())
    child_id = next(e for e in parent.events() if isinstance(e, SubagentStarted)).child_session_id
    first = parent.store.read(child_id)[0].event
    assert isinstance(first, SessionStarted) and first.permission_mode == "plan"
    assert not (tmp_path / "x.txt").exists()
