"""Builders for subagent tests: a parent loop with the `task` tool and scripted models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from kestrel.agent.agent_defs import AgentDefinition, builtin_agents
from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, OnRetry, OnSwitch, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.agent.subagents import SubagentRunner
from kestrel.agent.task_tool import task_tool
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn
from kestrel.policy.gate import PermissionGate
from kestrel.protocol.events import Event, Limits, ModelRole, PermissionMode, Record
from kestrel.protocol.messages import ModelRequest, StreamPart, UserTurn
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.base import EventStore
from kestrel.store.memory import MemoryStore
from kestrel.tools.base import Tool, ToolContext, ToolKind, ToolOutcome
from kestrel.tools.registry import ToolRegistry, default_tools


@dataclass(slots=True)
class Scripts:
    """A model streamer: the parent follows `parent`; a subagent follows the script keyed by
    the prompt it was given. Every request is kept, with the role it was sent to."""

    parent: Sequence[ScriptedTurn]
    children: Mapping[str, Sequence[ScriptedTurn]] = field(default_factory=dict)
    seen: list[tuple[ModelRole, ModelRequest]] = field(default_factory=list)

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        self.seen.append((role, request))
        first = request.messages[0] if request.messages else None
        prompt = first.text if isinstance(first, UserTurn) else ""
        turns = self.children.get(prompt, self.parent)
        return ScriptedProvider(turns).stream(request)

    def requests_for(self, prompt: str) -> list[tuple[ModelRole, ModelRequest]]:
        """The requests of the conversation that began with `prompt`."""
        return [
            (role, request)
            for role, request in self.seen
            if isinstance(request.messages[0], UserTurn) and request.messages[0].text == prompt
        ]


class MeetArgs(BaseModel):
    """Arguments of `meet`."""

    model_config = ConfigDict(extra="forbid")


@dataclass(slots=True)
class Meeting:
    """A read-only tool every caller must reach before any returns: proves calls overlap.

    `meet` answers `met` once `parties` callers are waiting at once, or `alone` when the others
    never came within `patience_s` (which only happens when the calls ran one after another).
    """

    parties: int
    patience_s: float = 10.0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the callers have met."""
    release: asyncio.Event | None = None
    """When set, callers also wait for this before answering (to hold a subagent mid-run)."""
    _barrier: asyncio.Barrier | None = None

    def tool(self) -> Tool:
        """The `meet` tool bound to this meeting."""
        return _MeetTool(self)

    async def meet(self) -> str:
        if self._barrier is None:
            self._barrier = asyncio.Barrier(self.parties)
        try:
            await asyncio.wait_for(self._barrier.wait(), self.patience_s)
        except TimeoutError:
            return "alone"
        self.arrived.set()
        if self.release is not None:
            await self.release.wait()
        return "met"


class _MeetTool:
    name: ClassVar[str] = "meet"
    description: ClassVar[str] = "Wait until every other caller has arrived."
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = MeetArgs

    def __init__(self, meeting: Meeting) -> None:
        self._meeting = meeting

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(content=await self._meeting.meet())


@dataclass(slots=True)
class Parent:
    """A parent loop with the `task` tool, its runner and its scripted models."""

    loop: AgentLoop
    runner: SubagentRunner
    scripts: Scripts

    @property
    def store(self) -> EventStore:
        return self.loop.store

    def records(self) -> list[Record]:
        return list(self.store.read(self.loop.session_id))

    def events(self) -> list[Event]:
        return [r.event for r in self.records()]


def make_parent(
    root: Path,
    scripts: Scripts,
    *,
    store: EventStore | None = None,
    session_id: str | None = None,
    mode: PermissionMode = "bypass",
    limits: Limits | None = None,
    definitions: Mapping[str, AgentDefinition] | None = None,
    extra_tools: Sequence[Tool] = (),
    gate: PermissionGate | None = None,
) -> Parent:
    """A parent session in `root` (new, or `session_id` of `store`) that can run subagents."""
    store = store or MemoryStore()
    if session_id is None:
        session_id = start_session(
            store,
            task="fix it",
            cwd=root,
            model="scripted",
            permission_mode=mode,
            limits=limits or Limits(),
            version="test",
        )
    runner = SubagentRunner(
        dict(definitions) if definitions is not None else builtin_agents(),
        context_note="You are being tested.",
        version="test",
    )
    tools = ToolRegistry([*default_tools(), *extra_tools, task_tool(runner)])
    loop = AgentLoop(
        store=store,
        session_id=session_id,
        streamer=scripts,
        tools=tools,
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="You are the parent."),
        gate=gate or PermissionGate(),
    )
    runner.attach(loop)
    return Parent(loop=loop, runner=runner, scripts=scripts)


def children(store: EventStore, parent_id: str) -> list[str]:
    """Ids of the sessions whose first event names `parent_id` as their parent."""
    return [s.session_id for s in store.sessions() if s.parent_session_id == parent_id]
