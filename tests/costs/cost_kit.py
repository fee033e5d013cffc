"""Builders for the cost-control tests: a hand-moved clock, priced scripted turns, loops."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.agent.daily import DailyBudget
from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import Checkpointer, DenyingApprover, OnRetry, OnSwitch, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn
from kestrel.protocol.events import Limits, ModelRole
from kestrel.protocol.messages import ModelRequest, StreamPart
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.base import EventStore
from kestrel.tools.registry import ToolRegistry, default_tools

NOON = dt.datetime(2025, 3, 14, 12, 0).timestamp()
"""Midday of a fixed local day, so "today" and "yesterday" never depend on when tests run."""


class Clock:
    """A clock the test moves by hand, shared by the loop and the store."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def priced(cost_usd: float, n: int = 1, *, tokens: int = 100) -> list[ScriptedTurn]:
    """`n` turns, each listing files a different way (no loop) for `cost_usd` and `tokens`."""
    return [
        ScriptedTurn(
            tool_calls=(("list_files", json.dumps({"pattern": f"*{i}*"})),),
            usage={"input_tokens": tokens, "output_tokens": 0, "cost_usd": cost_usd},
        )
        for i in range(n)
    ]


def done(text: str = "done") -> ScriptedTurn:
    """A final turn that says `text` and costs nothing."""
    return ScriptedTurn(text=text, usage={"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})


@dataclass
class RecordingStreamer:
    """Answers with a scripted model and keeps every request it was sent."""

    turns: Sequence[ScriptedTurn]
    requests: list[ModelRequest] = field(default_factory=list)
    look: Callable[[], str] | None = None
    """Called with each request, e.g. to read a file as the model's turn begins."""
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._inner = streamer_for(ScriptedProvider(self.turns), RetryPolicy(max_attempts=1))

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        self.requests.append(request)
        if self.look is not None:
            self.seen.append(self.look())
        return self._inner(request, role=role, on_retry=on_retry, on_switch=on_switch)


def make_loop(
    root: Path,
    turns: Sequence[ScriptedTurn] | RecordingStreamer,
    *,
    store: EventStore,
    clock: Clock,
    limits: Limits | None = None,
    daily: DailyBudget | None = None,
    checkpointer: Checkpointer | None = None,
    config: LoopConfig | None = None,
) -> AgentLoop:
    """A loop over a new session in `root`, in bypass mode, with real tools."""
    streamer = turns if isinstance(turns, RecordingStreamer) else RecordingStreamer(turns)
    session_id = start_session(
        store,
        task="fix it",
        cwd=root,
        model="scripted",
        permission_mode="bypass",
        limits=limits or Limits(),
        version="test",
    )
    return AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer,
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=config or LoopConfig(system_prompt="You are being tested."),
        clock=clock,
        checkpointer=checkpointer,
        daily=daily,
    )
