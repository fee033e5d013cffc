"""Subagents: the `task` tool runs a child session with its own context, tools and limits.

A subagent is an `AgentLoop` over a session of its own in the parent's event store. It sees only
its definition's system prompt and the prompt the model wrote; it has only its definition's
tools, in a permission mode never wider than the parent's; its spend counts toward the parent's
budgets; and its last text comes back to the parent as the `task` call's result. The parent's log
holds `subagent_started` and `subagent_finished`; the child's `session_started` names the parent
and the call, so either log leads to the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pydantic import BaseModel, ConfigDict, Field

from kestrel.agent import budgets
from kestrel.agent.agent_defs import AgentDefinition
from kestrel.agent.loop import MAX_STOP_BLOCKS, AgentLoop, LoopConfig
from kestrel.agent.ports import ModelStreamer
from kestrel.agent.session import new_session_id
from kestrel.agent.state import SessionState, replay, wall_seconds, with_subagent
from kestrel.agent.subagent_limits import WatchedStore, child_limits, narrower_mode
from kestrel.agent.tool_runner import hook_events
from kestrel.policy.hooks import HookEvent, HookVerdict
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import (
    FinishReason,
    Limits,
    ModelRole,
    SessionFinished,
    SessionStarted,
    SubagentFinished,
    SubagentStarted,
    ToolCallRequested,
    Totals,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, Message
from kestrel.tools.base import Tool, ToolFailed, ToolOutcome
from kestrel.tools.registry import ToolRegistry

TASK_TOOL = "task"
DEFAULT_AGENT = "explore"
_CHILD_HOOKS: tuple[HookEvent, ...] = ("PreToolUse", "PostToolUse")
"""The parent's hooks a subagent's calls run; its stop runs `SubagentStop` in the parent."""


class TaskArgs(BaseModel):
    """Arguments of `task`."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(
        min_length=1, max_length=120, description="A short (3-5 words) label for the log."
    )
    prompt: str = Field(
        min_length=1,
        description="The whole task for the subagent. It sees nothing of this conversation: "
        "say everything it needs to know and what its report should contain.",
    )
    agent: str | None = Field(
        default=None, description=f"Which subagent runs it (default: {DEFAULT_AGENT})."
    )


@dataclass(slots=True)
class _Child:
    loop: AgentLoop
    definition: AgentDefinition
    wall_left: float | None


@dataclass(slots=True)
class SubagentRunner:
    """Starts, runs and accounts for the subagents of one parent session."""

    definitions: Mapping[str, AgentDefinition]
    context_note: str = ""
    """Appended to every subagent's system prompt: the environment and the project's rules."""
    model_streamer: Callable[[str], ModelStreamer] | None = None
    """A streamer for a definition that names a `provider:model-id` rather than a role."""
    version: str = ""
    parent: AgentLoop | None = None
    _running: dict[str, _Child] = field(default_factory=dict)

    def attach(self, parent: AgentLoop) -> None:
        """Bind to the loop whose `task` calls this runner answers (it holds the tool)."""
        self.parent = parent

    async def run(self, args: TaskArgs, call_id: str) -> ToolOutcome:
        """Run one subagent to its end and return its report as the `task` call's result."""
        parent = self.parent
        if parent is None:
            raise ToolFailed("subagents are not available in this session")
        name = args.agent or DEFAULT_AGENT
        definition = self.definitions.get(name)
        if definition is None:
            known = ", ".join(sorted(self.definitions))
            raise ToolFailed(f"unknown agent {name!r}; available agents: {known}")
        earlier = _earlier_child(parent, call_id)
        if earlier is not None:
            return self._settle_earlier(parent, call_id, *earlier)
        child = self._start(parent, definition, args, call_id)
        try:
            finished = await self._drive(parent, child, call_id, args.description)
        except BaseException as exc:
            reason: FinishReason = (
                "cancelled" if isinstance(exc, asyncio.CancelledError) else "error"
            )
            detail = "cancelled" if reason == "cancelled" else f"{type(exc).__name__}: {exc}"
            self._finished(parent, call_id, child, reason, detail)
            raise
        finally:
            self._running.pop(call_id, None)
        return _report(finished, child.loop.session_id, child.loop.state.messages)

    def _start(
        self, parent: AgentLoop, definition: AgentDefinition, args: TaskArgs, call_id: str
    ) -> _Child:
        """Log the start in both sessions and build the child's loop."""
        mode = narrower_mode(
            definition.permission_mode,
            parent.config.permission_mode or parent.state.permission_mode,
        )
        wall = _parent_limits(parent).max_wall_s
        wall_left = (
            None if wall is None else max(0.0, wall - wall_seconds(parent.state, parent.clock()))
        )
        limits = self._limits(parent, definition, wall_left, exclude=call_id)
        if (spent := budgets.exceeded(limits, Totals())) is not None:
            raise ToolFailed(f"no subagent started: the session's {spent.budget} budget is spent")
        streamer, role, model, role_models = self._model(parent, definition)
        child_id = new_session_id()
        parent.emit(
            SubagentStarted(
                call_id=call_id,
                child_session_id=child_id,
                agent=definition.name,
                description=args.description,
                model=model,
                role=role,
            )
        )
        store = parent.store
        store.append(
            child_id,
            SessionStarted(
                session_id=child_id,
                task=args.prompt,
                cwd=parent.state.cwd,
                model=model,
                permission_mode=mode,
                limits=limits,
                kestrel_version=self.version,
                parent_session_id=parent.session_id,
                parent_call_id=call_id,
            ),
        )
        store.append(child_id, UserMessage(text=args.prompt))
        hooks = parent.gate.hooks
        env = parent.environment
        loop = AgentLoop(
            store=WatchedStore(store, self._rebalance),
            session_id=child_id,
            streamer=streamer,
            tools=ToolRegistry(_child_tools(parent.tools, definition)),
            environment=replace(env, artifacts_dir=env.artifacts_dir.parent / child_id),
            approver=parent.approver,
            config=LoopConfig(
                system_prompt="\n\n".join(p for p in (definition.prompt, self.context_note) if p),
                max_output_tokens=parent.config.max_output_tokens,
                warn_after=parent.config.warn_after,
                stop_after=parent.config.stop_after,
                model=model,
                role_models=role_models,
                role=role or "main",
            ),
            clock=parent.clock,
            gate=replace(parent.gate, hooks=hooks and hooks.restricted_to(_CHILD_HOOKS)),
        )
        child = _Child(loop=loop, definition=definition, wall_left=wall_left)
        self._running[call_id] = child
        return child

    def _model(
        self, parent: AgentLoop, definition: AgentDefinition
    ) -> tuple[ModelStreamer, ModelRole | None, str, Mapping[ModelRole, str]]:
        """The streamer, role, first model and role models of a subagent."""
        role = definition.role
        if role is not None:
            models = parent.config.role_models
            model = models.get(role) or parent.config.model or parent.state.model
            return parent.streamer, role, model, models
        unreachable = ToolFailed(
            f"agent {definition.name!r} names model {definition.model!r}, which this "
            "session cannot reach; name a role (main, plan, fast, edit) instead"
        )
        if self.model_streamer is None:
            raise unreachable
        try:
            streamer = self.model_streamer(definition.model)
        except ConfigError as exc:
            raise ToolFailed(f"{unreachable}: {exc}") from exc
        return streamer, None, definition.model, {}

    def _limits(
        self,
        parent: AgentLoop,
        definition: AgentDefinition,
        wall_left: float | None,
        *,
        exclude: str,
    ) -> Limits:
        """The child's limits now: the parent's, less the parent's and its siblings' spend."""
        spent = parent.state.totals
        for call_id, sibling in self._running.items():
            if call_id != exclude:
                spent = with_subagent(spent, sibling.loop.state.totals)
        return child_limits(
            _parent_limits(parent), spent, max_turns=definition.max_turns, wall_left=wall_left
        )

    def _rebalance(self) -> None:
        """After any subagent logs an event: what each running one may still spend."""
        parent = self.parent
        if parent is None:
            return
        for call_id, child in self._running.items():
            limits = self._limits(parent, child.definition, child.wall_left, exclude=call_id)
            child.loop.config = replace(child.loop.config, limits=limits)

    async def _drive(
        self, parent: AgentLoop, child: _Child, call_id: str, description: str
    ) -> SessionFinished:
        """Run the child; `SubagentStop` hooks may send it back to work, as `Stop` hooks do."""
        finished = await child.loop.run()
        blocks = 0
        while finished.reason == "done" and blocks < MAX_STOP_BLOCKS:
            verdict = await self._stop_hooks(parent, child, call_id, description, blocks > 0)
            if verdict is None or not verdict.block:
                break
            blocks += 1
            reason = verdict.reason or "a SubagentStop hook asked to keep going"
            finished = await child.loop.send(f"[SubagentStop hook] {reason}")
        self._finished(parent, call_id, child, finished.reason, finished.detail)
        return finished

    async def _stop_hooks(
        self, parent: AgentLoop, child: _Child, call_id: str, description: str, active: bool
    ) -> HookVerdict | None:
        hooks = parent.gate.hooks
        if hooks is None or not hooks.matching("SubagentStop"):
            return None
        payload = {
            "stop_hook_active": active,
            "agent": child.definition.name,
            "description": description,
            "subagent_session_id": child.loop.session_id,
            "tool_use_id": call_id,
        }
        verdict = await hooks.run("SubagentStop", payload)
        for ran in hook_events(verdict, call_id):
            parent.emit(ran)
        return verdict

    def _finished(
        self, parent: AgentLoop, call_id: str, child: _Child, reason: FinishReason, detail: str
    ) -> None:
        parent.emit(
            SubagentFinished(
                call_id=call_id,
                child_session_id=child.loop.session_id,
                agent=child.definition.name,
                reason=reason,
                detail=detail,
                totals=child.loop.state.totals,
            )
        )

    def _settle_earlier(
        self, parent: AgentLoop, call_id: str, started: SubagentStarted, accounted: bool
    ) -> ToolOutcome:
        """The call ran before this process (a resume): report what its subagent left, closing
        its session and adding its spend to the parent's if that had not happened yet."""
        child, ended = _close(parent, call_id, started, accounted)
        if ended is not None:
            return _report(ended, started.child_session_id, child.messages)
        return ToolOutcome(
            content="[kestrel] Interrupted: the session stopped while this subagent was running "
            f"(session {started.child_session_id}), so its report was lost. Run the task again "
            "if it is still needed.",
            is_error=True,
        )

    def may_change_files(self, agent: str) -> bool:
        """Whether the subagent called `agent` has a tool that edits files or runs commands."""
        definition = self.definitions.get(agent)
        parent = self.parent
        if definition is None or parent is None:
            return False
        tools = _child_tools(parent.tools, definition)
        return any(tool.kind in ("edit", "execute") for tool in tools)


def close_lost(parent: AgentLoop) -> None:
    """After a resume settled the parent's cut-short calls: close the session of every subagent
    whose `task` call now has a result (it was rolled back) but that never finished, and add its
    spend to the parent's. Nothing runs it again."""
    running: dict[str, SubagentStarted] = {}
    for record in parent.store.read(parent.session_id):
        event = record.event
        if isinstance(event, SubagentStarted):
            running[event.call_id] = event
        elif isinstance(event, SubagentFinished):
            running.pop(event.call_id, None)
    for call_id, started in running.items():
        if call_id in parent.state.results:
            _close(parent, call_id, started, accounted=False)


def _close(
    parent: AgentLoop, call_id: str, started: SubagentStarted, accounted: bool
) -> tuple[SessionState, SessionFinished | None]:
    """End the session of a subagent an earlier process started, if it had not ended, and log
    its end in the parent unless `accounted`; its state and how it had ended, if it had."""
    store = parent.store
    child = replay(store.read(started.child_session_id))
    ended = child.finished
    lost = "the parent session stopped while this subagent ran"
    if child.session_id and ended is None:
        store.append(
            started.child_session_id,
            SessionFinished(reason="cancelled", detail=lost, totals=child.totals),
        )
    if not accounted:
        parent.emit(
            SubagentFinished(
                call_id=call_id,
                child_session_id=started.child_session_id,
                agent=started.agent,
                reason="cancelled" if ended is None else ended.reason,
                detail=lost if ended is None else ended.detail,
                totals=child.totals,
            )
        )
    return child, ended


def _parent_limits(parent: AgentLoop) -> Limits:
    return parent.config.limits or parent.state.limits


def _child_tools(tools: ToolRegistry, definition: AgentDefinition) -> list[Tool]:
    """The definition's tools that the parent has; never `task` (subagents do not nest)."""
    names = definition.tools if definition.tools is not None else tools.names()
    found = [tools.get(name) for name in names if name != TASK_TOOL]
    return [tool for tool in found if tool is not None]


def _earlier_child(parent: AgentLoop, call_id: str) -> tuple[SubagentStarted, bool] | None:
    """The subagent an earlier process started for this call, and whether it was accounted
    for; None when the call has not started one since it was last requested."""
    started: SubagentStarted | None = None
    done = False
    for record in parent.store.read(parent.session_id):
        event = record.event
        if isinstance(event, ToolCallRequested) and event.call.id == call_id:
            started, done = None, False  # A rewound conversation may reuse an id.
        elif isinstance(event, SubagentStarted) and event.call_id == call_id:
            started, done = event, False
        elif isinstance(event, SubagentFinished) and event.call_id == call_id:
            done = True
    return None if started is None else (started, done)


def _done_text(finished: SessionFinished) -> str:
    return finished.final_text.strip() or "[kestrel] The subagent finished without a report."


def _report(finished: SessionFinished, session_id: str, messages: Sequence[Message]) -> ToolOutcome:
    """The `task` call's result: the subagent's last text, or why it stopped early."""
    if finished.reason == "done":
        return ToolOutcome(content=_done_text(finished))
    last = next((m.text for m in reversed(messages) if isinstance(m, AssistantTurn) and m.text), "")
    lines = [
        f"[kestrel] The subagent stopped before it finished ({finished.reason}: "
        f"{finished.detail or 'no detail'}; session {session_id})."
    ]
    if last:
        lines.append(f"Its last message:\n{last}")
    return ToolOutcome(content="\n".join(lines), is_error=True)
