"""Calls whose server reported no usage: their tokens are estimated, budgets still count them,
and budgets that cannot work as set are said once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from kestrel.agent.budget_notices import after_call, at_start, unpriced
from kestrel.agent.compaction import message_tokens, request_tokens
from kestrel.agent.daily import DailyLimits
from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.agent.usage_estimate import estimated_usage
from kestrel.app import streamer_for
from kestrel.models.pricing import find_price
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn
from kestrel.protocol.events import BudgetNotice, Limits
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    StreamPart,
    ToolCall,
    ToolSpec,
    Usage,
    UserTurn,
)
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.memory import MemoryStore
from kestrel.tools.registry import ToolRegistry, default_tools

REQUEST = ModelRequest(
    system="You are a careful coding agent. " * 40,
    messages=(UserTurn(text="fix the failing test in calc.py, please"),),
    tools=(
        ToolSpec(name="read_file", description="Read a file.", input_schema={"type": "object"}),
    ),
)
REPLY = AssistantTurn(
    text="Reading it.", tool_calls=(ToolCall(id="c1", name="read_file", arguments='{"p": 1}'),)
)


def test_reported_usage_is_kept_as_it_is() -> None:
    usage = Usage(model="gpt-4o", input_tokens=7, output_tokens=3, cost_usd=0.5)
    assert estimated_usage(usage, REQUEST, REPLY) is usage


def test_unreported_usage_is_estimated_from_the_request_and_the_reply() -> None:
    usage = Usage(model="my-local-model", priced=False, tokens_reported=False)
    got = estimated_usage(usage, REQUEST, REPLY)
    expected_in = request_tokens(REQUEST.system, REQUEST.messages, REQUEST.tools)
    assert (got.input_tokens, got.output_tokens) == (expected_in, message_tokens(REPLY))
    assert got.input_tokens > 300  # 1,280 characters of system prompt alone
    assert (got.tokens_reported, got.priced, got.cost_usd) == (False, False, 0.0)


def test_estimated_tokens_of_a_priced_model_are_priced() -> None:
    usage = Usage(model="gpt-4o", tokens_reported=False)
    got = estimated_usage(usage, REQUEST, REPLY)
    price = find_price("gpt-4o")
    assert price is not None
    expected = (got.input_tokens * price.input + got.output_tokens * price.output) / 1e6
    assert got.priced and got.cost_usd == pytest.approx(expected) and got.cost_usd > 0


def test_a_model_is_unpriced_only_on_a_priced_provider_without_a_price() -> None:
    assert unpriced("openai:my-local-model") and not unpriced("openai:gpt-4o")
    assert unpriced("anthropic:claude-future-9") and not unpriced("anthropic:claude-sonnet-4-5")
    assert not unpriced("scripted:script.json")


def test_cost_budgets_on_an_unpriced_model_are_said_at_the_start() -> None:
    limits = Limits(max_cost_usd=1.0, max_tokens=100)
    daily = DailyLimits(max_cost_usd=5.0)
    found = at_start(limits, daily, ["openai:gpt-4o", "openai:my-local-model"], set())
    assert [(n.budget, n.enforced) for n in found] == [("cost", False), ("cost_per_day", False)]
    assert found[0].detail.startswith(
        "the cost budget cannot be enforced: no price is known for openai:my-local-model "
    )
    assert at_start(limits, daily, ["openai:my-local-model"], {"cost", "cost_per_day"}) == []
    assert at_start(limits, daily, ["openai:gpt-4o"], set()) == []
    assert at_start(Limits(max_tokens=100), None, ["openai:my-local-model"], set()) == []


def test_a_call_without_usage_says_the_token_budgets_count_estimates() -> None:
    usage = Usage(model="my-local-model", tokens_reported=False)
    limits = Limits(max_tokens=100, max_cost_usd=1.0)
    found = after_call(limits, DailyLimits(max_tokens=10), usage, set())
    assert [(n.budget, n.enforced) for n in found] == [("tokens", True), ("tokens_per_day", True)]
    assert found[0].detail.startswith("the token budget counts estimates: the server for ")
    assert after_call(limits, None, replace(usage, tokens_reported=True), set()) == []


class NoUsage:
    """A real scripted model whose replies carry no usage, as a server that reports none."""

    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        self._inner = ScriptedProvider(turns, model="my-local-model")

    @property
    def model(self) -> str:
        return "my-local-model"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        async for part in self._inner.stream(request):
            if isinstance(part, Completion):
                bare = Usage(model=self.model, priced=False, tokens_reported=False)
                part = replace(part, usage=bare)
            yield part


def listing(n: int) -> list[ScriptedTurn]:
    return [
        ScriptedTurn(tool_calls=(("list_files", json.dumps({"pattern": f"*{i}*"})),))
        for i in range(n)
    ]


def loop_on(root: Path, turns: Sequence[ScriptedTurn], limits: Limits) -> AgentLoop:
    store = MemoryStore()
    model = "openai:my-local-model"
    session_id = start_session(
        store,
        task="list",
        cwd=root,
        model=model,
        permission_mode="bypass",
        limits=limits,
        version="test",
    )
    return AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer_for(NoUsage(turns), RetryPolicy(max_attempts=1)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="You are being tested. " * 50, model=model),
    )


async def test_a_token_budget_stops_a_session_whose_server_reports_no_usage(
    tmp_path: Path,
) -> None:
    loop = loop_on(tmp_path, listing(30), Limits(max_tokens=3_000, max_cost_usd=1.0))
    finished = await loop.run()
    assert finished.reason == "budget" and finished.detail.startswith("tokens budget spent")
    assert 1 < finished.totals.turns < 30 and finished.totals.tokens >= 3_000
    assert (finished.totals.tokens_estimated, finished.totals.cost_known) == (True, False)
    events = [r.event for r in loop.store.read(loop.session_id)]
    notices = [e for e in events if isinstance(e, BudgetNotice)]
    # The cost notice comes from the price table before the first call; the token one after it.
    assert [(n.budget, n.enforced) for n in notices] == [("cost", False), ("tokens", True)]
    first_call = next(i for i, e in enumerate(events) if e.type == "model_request_started")
    assert events.index(notices[0]) < first_call < events.index(notices[1])


async def test_a_resumed_session_does_not_repeat_its_notices(tmp_path: Path) -> None:
    turns = [*listing(2), ScriptedTurn(text="done"), ScriptedTurn(text="done again")]
    loop = loop_on(tmp_path, turns, Limits(max_cost_usd=1.0))
    assert (await loop.run()).reason == "done"
    again = AgentLoop(
        store=loop.store,
        session_id=loop.session_id,
        streamer=loop.streamer,
        tools=loop.tools,
        environment=loop.environment,
        approver=loop.approver,
        config=loop.config,
    )
    assert (await again.send("and once more")).reason == "done"
    events = [r.event for r in loop.store.read(loop.session_id)]
    assert [e.budget for e in events if isinstance(e, BudgetNotice)] == ["cost"]
