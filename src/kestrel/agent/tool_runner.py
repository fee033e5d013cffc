"""Runs one turn's tool calls: permission first, then reads in parallel and the rest in order."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kestrel.agent.asking import ask_person
from kestrel.agent.big_arguments import full_call
from kestrel.agent.output_coalescing import OutputCoalescer
from kestrel.agent.ports import Approver, Checkpointer, ToolEnvironment
from kestrel.agent.state import SessionState
from kestrel.policy.gate import GateDecision, PermissionGate
from kestrel.policy.hooks import HookVerdict
from kestrel.policy.injection import frame, scan
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    CheckpointCreated,
    ErrorOccurred,
    Event,
    FileChanged,
    HookRan,
    InjectionFlagged,
    PermissionDecided,
    PermissionMode,
    Record,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
)
from kestrel.protocol.messages import ToolCall
from kestrel.tools.base import PlannedWrite, ToolContext, ToolOutcome
from kestrel.tools.crash_hook import before_running
from kestrel.tools.paths import stage_write, staged_write
from kestrel.tools.registry import ToolRegistry
from kestrel.tools.subjects import describe_call, from_hook_input, hook_input

MAX_LISTED_CHANGES = 200
"""Changed paths listed in one checkpoint event; the rest are counted."""


class ToolRunner:
    """Turns tool calls into permission decisions, runs and results, each one an event."""

    def __init__(
        self,
        emit: Callable[[Event], Record],
        state: SessionState,
        tools: ToolRegistry,
        environment: ToolEnvironment,
        approver: Approver,
        mode: PermissionMode,
        checkpointer: Checkpointer | None = None,
        read_hashes: dict[str, str] | None = None,
        gate: PermissionGate | None = None,
    ) -> None:
        self._emit = emit
        self._gate = gate or PermissionGate()
        self._state = state
        self._tools = tools
        self._env = environment
        self._approver = approver
        self._mode = mode
        self._checkpointer = checkpointer
        # Shared by every call, so an edit can tell whether its file changed since it was read.
        self._read_hashes = {} if read_hashes is None else read_hashes

    async def run_calls(self, calls: Sequence[ToolCall]) -> list[tuple[ToolCall, str]]:
        """Run the calls that have no result yet; return every call with its result, in order."""
        todo = [c for c in calls if c.id not in self._state.results]
        for call in todo:
            if call.id not in self._state.calls:
                kind = self._tools.call_kind(call)
                self._emit(ToolCallRequested(call=call, read_only=kind == "read"))
        # A call whose arguments were moved to a file is judged and run with them whole.
        whole = [full_call(c, self._env.artifacts_dir) for c in todo]
        allowed = [c for c in whole if await self._permitted(c)]
        for group in _batches(allowed, self._tools):
            changing = tuple(c for c in group if self._tools.call_kind(c) in ("edit", "execute"))
            if changing:
                # The call's rollback point: a crash inside it is undone back to here. It
                # records nothing when nothing changed since the last checkpoint.
                first = not self._state.checkpoints
                await self._checkpoint("before the first change" if first else "before a call", ())
            await asyncio.gather(*(self._run_one(self._as_decided(c)) for c in group))
            if changing:
                names = ", ".join(sorted({c.name for c in changing}))
                await self._checkpoint(f"after {names}", tuple(c.id for c in changing))
        return [(c, self._state.results[c.id].content) for c in calls]

    def interrupt_unfinished(self, reason: str, keep: frozenset[str] = frozenset()) -> None:
        """Give every call of the turn that has no result an interrupted one, but those in
        `keep` (left for a resume to settle)."""
        for call in self._state.unfinished:
            if call.id in keep:
                continue
            self._emit(
                ToolFinished(
                    call_id=call.id,
                    name=call.name,
                    content=f"[kestrel] Interrupted: {reason}.",
                    is_error=True,
                    interrupted=True,
                )
            )

    async def _checkpoint(self, label: str, call_ids: tuple[str, ...]) -> None:
        """Record the workspace; a failure is logged and the session goes on without it."""
        if self._checkpointer is None:
            return
        try:
            snapshot = await self._checkpointer.snapshot(label)
        except KestrelError as exc:
            self._emit(
                ErrorOccurred(error_kind=type(exc).__name__, message=str(exc), recoverable=True)
            )
            return
        if snapshot is None:
            return
        shown = snapshot.changes[:MAX_LISTED_CHANGES] if call_ids else ()
        self._emit(
            CheckpointCreated(
                checkpoint_id=snapshot.checkpoint_id,
                label=label,
                call_ids=call_ids,
                changes=shown,
                more_changes=len(snapshot.changes) - len(shown) if call_ids else 0,
                tree=snapshot.tree,
            )
        )

    async def _permitted(self, call: ToolCall) -> bool:
        decided = self._state.decisions.get(call.id)
        if decided is None:
            decided = await self._decide(call)
            self._emit(decided)
        if decided.decision == "allow":
            return True
        self._emit(
            ToolFinished(
                call_id=call.id,
                name=call.name,
                content=f"Permission denied: {decided.reason}. Do not retry this call as is.",
                is_error=True,
            )
        )
        return False

    async def _decide(self, call: ToolCall) -> PermissionDecided:
        kind = self._tools.kind(call.name)
        subject = describe_call(call, kind, self._env.root)
        decision = await self._gate.check(
            subject,
            self._mode,
            tainted=self._state.flagged,
            call_id=call.id,
            hook_input=hook_input(subject),
            from_hook_input=lambda updated: from_hook_input(subject, updated),
        )
        self._report_hooks(decision.hooks, call.id)
        updated = json.dumps(decision.subject.arguments) if decision.updated else None
        if decision.verdict != "ask" or kind is None:
            return PermissionDecided(
                call_id=call.id,
                decision="allow" if decision.verdict == "allow" else "deny",
                decided_by=decision.decided_by,
                reason=decision.reason,
                source=decision.source,
                updated_arguments=updated,
            )
        asked = _question(decision)
        shown = call if updated is None else replace(call, arguments=updated)
        repeatable = decision.decided_by != "classifier"
        answer = await ask_person(
            self._emit, self._state, self._approver, shown, kind, asked, repeatable=repeatable
        )
        return PermissionDecided(
            call_id=call.id,
            decision="allow" if answer.allow else "deny",
            decided_by=answer.decided_by,
            reason=answer.reason or asked,
            source=decision.source,
            asked=asked,
            updated_arguments=updated,
        )

    def _as_decided(self, call: ToolCall) -> ToolCall:
        """The call as permitted: with the arguments a hook replaced, if one did."""
        decided = self._state.decisions.get(call.id)
        if decided is None or decided.updated_arguments is None:
            return call
        return replace(call, arguments=decided.updated_arguments)

    def _report_hooks(self, verdict: HookVerdict | None, call_id: str | None) -> None:
        for event in hook_events(verdict, call_id):
            self._emit(event)

    async def _run_one(self, call: ToolCall) -> None:
        self._emit(ToolStarted(call_id=call.id, name=call.name))
        before_running(call.name)  # Does nothing outside tests.
        started = time.perf_counter()
        output = OutputCoalescer(call.id, self._emit)
        try:
            outcome = await self._tools.dispatch(call, self._context(call.id, output))
        finally:
            output.flush()
        duration_ms = (time.perf_counter() - started) * 1000
        content = self._screen(call, outcome.content)
        content = await self._after_hooks(call, outcome, content)
        for event in outcome.events:
            self._emit(event)
        self._emit(
            ToolFinished(
                call_id=call.id,
                name=call.name,
                content=content,
                is_error=outcome.is_error,
                exit_code=outcome.exit_code,
                duration_ms=duration_ms,
                truncated=outcome.truncated,
                full_output_path=outcome.full_output_path,
            )
        )

    def _screen(self, call: ToolCall, content: str) -> str:
        """Flag text aimed at the agent in a result, and frame the result as data if any."""
        if self._tools.kind(call.name) == "edit":
            return content  # An edit's result shows what the model itself wrote.
        findings = scan(content)
        if not findings:
            return content
        self._emit(
            InjectionFlagged(
                call_id=call.id, name=call.name, findings=tuple(f.describe() for f in findings)
            )
        )
        return frame(content, call.name, findings)

    async def _after_hooks(self, call: ToolCall, outcome: ToolOutcome, content: str) -> str:
        """Run PostToolUse hooks; what they say to the model is added to the result."""
        hooks = self._gate.hooks
        if hooks is None:
            return content
        subject = describe_call(call, self._tools.kind(call.name), self._env.root)
        name, tool_input = hook_input(subject)
        names = {name, call.name, *subject.aliases}
        if not hooks.matching("PostToolUse", names):
            return content
        response: Mapping[str, Any] = {
            "content": outcome.content,
            "is_error": outcome.is_error,
            "exit_code": outcome.exit_code,
        }
        payload = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_response": response,
            "tool_use_id": call.id,
        }
        verdict = await hooks.run("PostToolUse", payload, tool_names=names)
        self._report_hooks(verdict, call.id)
        notes = []
        if verdict.block:
            notes.append(f"[hook] PostToolUse: {verdict.reason or 'the hook objected'}")
        if verdict.additional_context:
            notes.append(f"[hook] {verdict.additional_context}")
        return "\n\n".join([content, *notes])

    def _context(self, call_id: str, output: OutputCoalescer) -> ToolContext:
        async def before_write(write: PlannedWrite) -> None:
            if write.after is not None and write.after_hash is not None:
                staged = staged_write(self._env.artifacts_dir, write.after_hash)
                await asyncio.to_thread(stage_write, staged, write.after)
            self._emit(
                FileChanged(
                    call_id=call_id,
                    path=write.path,
                    before_hash=write.before_hash,
                    after_hash=write.after_hash,
                    diff=write.diff,
                )
            )

        env = self._env
        return ToolContext(
            root=env.root,
            executor=env.executor,
            artifacts_dir=env.artifacts_dir,
            on_output=output.add,
            before_write=before_write,
            bash_timeout_s=env.bash_timeout_s,
            max_output_chars=env.max_output_chars,
            read_hashes=self._read_hashes,
            call_id=call_id,
        )


def hook_events(verdict: HookVerdict | None, call_id: str | None = None) -> list[HookRan]:
    """One `hook_ran` event per hook command that ran for `verdict`."""
    if verdict is None:
        return []
    return [
        HookRan(
            hook_event=result.event,
            command=result.command,
            outcome=result.outcome,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            call_id=call_id,
            message=_trim(result.stderr),
        )
        for result in verdict.results
    ]


def _question(decision: GateDecision) -> str:
    """Why the person is asked, naming what decided that a question was needed."""
    if decision.decided_by == "classifier":
        return f"Kestrel asks because {decision.reason}"
    return decision.reason


def _trim(text: str, limit: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _batches(calls: Sequence[ToolCall], tools: ToolRegistry) -> list[list[ToolCall]]:
    """Consecutive read-only calls form one parallel batch; every other call runs alone."""
    batches: list[list[ToolCall]] = []
    for call in calls:
        reading = tools.call_kind(call) == "read"
        if reading and batches and tools.call_kind(batches[-1][0]) == "read":
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches
