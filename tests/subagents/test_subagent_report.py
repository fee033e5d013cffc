"""A subagent's report returns to the parent, its events nest, and its spend is the parent's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from subagent_kit import Scripts, children, make_parent

from kestrel.agent.task_tool import TaskTool
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import (
    ModelRequestStarted,
    SessionFinished,
    SessionStarted,
    SubagentFinished,
    SubagentStarted,
    ToolFinished,
)
from kestrel.protocol.messages import ToolResultTurn, UserTurn

PROMPT = "Where is add defined? Report path:line."


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return project


def _scripts() -> Scripts:
    return Scripts(
        parent=[
            call("task", description="find add", prompt=PROMPT, agent="explore"),
            say("add lives in calc.py; done."),
        ],
        children={
            PROMPT: [
                call("grep", pattern="def add"),
                say("add is defined at calc.py:1."),
            ]
        },
    )


def test_the_report_is_the_task_result_and_the_child_session_nests(root: Path) -> None:
    parent = make_parent(root, _scripts())
    finished = asyncio.run(parent.loop.run())

    assert finished.reason == "done"
    result = next(e for e in parent.events() if isinstance(e, ToolFinished) and e.name == "task")
    assert (result.content, result.is_error) == ("add is defined at calc.py:1.", False)
    started = next(e for e in parent.events() if isinstance(e, SubagentStarted))
    ended = next(e for e in parent.events() if isinstance(e, SubagentFinished))
    assert (started.call_id, started.agent, started.description) == (
        result.call_id,
        "explore",
        "find add",
    )
    assert started.role == "fast"
    assert (ended.child_session_id, ended.reason) == (started.child_session_id, "done")
    types = [e.type for e in parent.events()]
    assert types.index("subagent_started") < types.index("subagent_finished")
    assert types.index("subagent_finished") < types.index(
        "tool_finished", types.index("tool_started")
    )

    child_id = started.child_session_id
    assert children(parent.store, parent.loop.session_id) == [child_id]
    child = [r.event for r in parent.store.read(child_id)]
    first = child[0]
    assert isinstance(first, SessionStarted)
    assert (first.parent_session_id, first.parent_call_id) == (
        parent.loop.session_id,
        result.call_id,
    )
    assert first.permission_mode == "plan"
    assert [e.type for e in child if e.type.startswith(("tool_", "session_"))] == [
        "session_started",
        "tool_call_requested",
        "tool_started",
        "tool_finished",
        "session_finished",
    ]
    last = child[-1]
    assert isinstance(last, SessionFinished) and last.final_text == "add is defined at calc.py:1."


def test_the_subagent_sees_only_its_own_prompt_on_the_fast_role(root: Path) -> None:
    parent = make_parent(root, _scripts())
    asyncio.run(parent.loop.run())

    asked = parent.scripts.requests_for(PROMPT)
    assert [role for role, _ in asked] == ["fast", "fast"]
    _, request = asked[0]
    assert request.messages == (UserTurn(text=PROMPT),)
    assert request.system.startswith("You are a read-only explorer")
    assert "You are the parent." not in request.system
    assert [t.name for t in request.tools] == ["read_file", "list_files", "grep"]
    second = asked[1][1].messages
    assert isinstance(second[-1], ToolResultTurn) and "calc.py" in second[-1].content
    child_id = next(e for e in parent.events() if isinstance(e, SubagentStarted)).child_session_id
    logged = [r.event for r in parent.store.read(child_id)]
    assert [e.role for e in logged if isinstance(e, ModelRequestStarted)] == ["fast", "fast"]
    own = [e.role for e in parent.events() if isinstance(e, ModelRequestStarted)]
    assert own == ["main", "main"]


def test_the_childs_spend_is_in_the_parents_totals(root: Path) -> None:
    costly = [
        ScriptedTurn(
            text=t.text,
            tool_calls=t.tool_calls,
            usage={"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.25},
        )
        for t in _scripts().children[PROMPT]
    ]
    parent_turns = [
        ScriptedTurn(
            text=t.text,
            tool_calls=t.tool_calls,
            usage={"input_tokens": 1000, "output_tokens": 50, "cost_usd": 1.0},
        )
        for t in _scripts().parent
    ]
    parent = make_parent(root, Scripts(parent=parent_turns, children={PROMPT: costly}))
    finished = asyncio.run(parent.loop.run())

    ended = next(e for e in parent.events() if isinstance(e, SubagentFinished))
    assert (ended.totals.turns, ended.totals.input_tokens, ended.totals.output_tokens) == (
        2,
        200,
        20,
    )
    assert ended.totals.cost_usd == pytest.approx(0.5)
    totals = finished.totals
    assert (totals.turns, totals.input_tokens, totals.output_tokens) == (4, 2200, 120)
    assert totals.cost_usd == pytest.approx(2.5)
    assert totals.tool_calls == 2  # the parent's task call and the child's grep


def test_the_tool_lists_the_agents_and_their_descriptions(root: Path) -> None:
    parent = make_parent(root, _scripts())
    tool = parent.loop.tools.get("task")
    assert isinstance(tool, TaskTool)
    spec = next(s for s in parent.loop.tools.specs() if s.name == "task")
    for name in ("explore", "plan", "review"):
        assert f"- {name}: " in spec.description
    assert set(spec.input_schema["required"]) == {"description", "prompt"}  # type: ignore[arg-type]


def test_an_unknown_agent_is_an_error_the_model_sees(root: Path) -> None:
    scripts = Scripts(parent=[call("task", description="x", prompt="p", agent="nobody"), say("ok")])
    parent = make_parent(root, scripts)
    asyncio.run(parent.loop.run())
    result = next(e for e in parent.events() if isinstance(e, ToolFinished))
    assert result.is_error
    assert result.content == "unknown agent 'nobody'; available agents: explore, plan, review"
    assert children(parent.store, parent.loop.session_id) == []
