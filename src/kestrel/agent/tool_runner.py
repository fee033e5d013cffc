"""Runs one turn's tool calls: permission first, then reads in parallel and the rest in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Literal

from kestrel.agent.ports import Approver, Checkpointer, ToolEnvironment
from kestrel.agent.state import SessionState
from kestrel.policy.modes import decide
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    CheckpointCreated,
    ErrorOccurred,
    Event,
    FileChanged,
    PermissionDecided,
    PermissionMode,
    Record,
    ToolCallRequested,
    ToolFinished,
    ToolOutputChunk,
    ToolStarted,
)
from kestrel.protocol.messages import ToolCall
from kestrel.tools.base import PlannedWrite, ToolContext
from kestrel.tools.registry import ToolRegistry

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
    ) -> None:
        self._emit = emit
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
                kind = self._tools.kind(call.name)
                self._emit(ToolCallRequested(call=call, read_only=kind == "read"))
        allowed = [c for c in todo if await self._permitted(c)]
        for group in _batches(allowed, self._tools):
            changing = tuple(c for c in group if self._tools.kind(c.name) in ("edit", "execute"))
            if changing and not self._state.checkpoints:
                await self._checkpoint("before the first change", ())
            await asyncio.gather(*(self._run_one(c) for c in group))
            if changing:
                names = ", ".join(sorted({c.name for c in changing}))
                await self._checkpoint(f"after {names}", tuple(c.id for c in changing))
        return [(c, self._state.results[c.id].content) for c in calls]

    def interrupt_unfinished(self, reason: str) -> None:
        """Give every call of the turn that has no result an interrupted one."""
        for call in self._state.unfinished:
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
        verdict = decide(self._mode, kind)
        if verdict.verdict != "ask" or kind is None:
            allow: Literal["allow", "deny"] = "allow" if verdict.verdict == "allow" else "deny"
            return PermissionDecided(
                call_id=call.id, decision=allow, decided_by="mode", reason=verdict.reason
            )
        answer = await self._approver.ask(call, kind, verdict.reason)
        return PermissionDecided(
            call_id=call.id,
            decision="allow" if answer.allow else "deny",
            decided_by=answer.decided_by,
            reason=answer.reason or verdict.reason,
        )

    async def _run_one(self, call: ToolCall) -> None:
        self._emit(ToolStarted(call_id=call.id, name=call.name))
        started = time.perf_counter()
        outcome = await self._tools.dispatch(call, self._context(call.id))
        self._emit(
            ToolFinished(
                call_id=call.id,
                name=call.name,
                content=outcome.content,
                is_error=outcome.is_error,
                exit_code=outcome.exit_code,
                duration_ms=(time.perf_counter() - started) * 1000,
                truncated=outcome.truncated,
                full_output_path=outcome.full_output_path,
            )
        )

    def _context(self, call_id: str) -> ToolContext:
        def on_output(stream: Literal["stdout", "stderr"], text: str) -> None:
            self._emit(ToolOutputChunk(call_id=call_id, stream=stream, text=text))

        async def before_write(write: PlannedWrite) -> None:
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
            on_output=on_output,
            before_write=before_write,
            bash_timeout_s=env.bash_timeout_s,
            max_output_chars=env.max_output_chars,
            read_hashes=self._read_hashes,
        )


def _batches(calls: Sequence[ToolCall], tools: ToolRegistry) -> list[list[ToolCall]]:
    """Consecutive read-only calls form one parallel batch; every other call runs alone."""
    batches: list[list[ToolCall]] = []
    for call in calls:
        reading = tools.kind(call.name) == "read"
        if reading and batches and tools.kind(batches[-1][0].name) == "read":
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches
