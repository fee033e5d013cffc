"""One prompt's run: the session's own process runs it; this follows its log and renders it.

A run is `kestrel resume ID [MESSAGE] -p --wait-for-approvals` in the session's checkout, as a
server's worker runs one: the overlay it works in needs a process with a single thread, which
this one (reading the editor's messages) is not, and a crash of the run takes nothing else
with it. Its events reach the editor through the log; each permission question it logs is put
to the editor (`session/request_permission`) and the answer written back to the log, where the
waiting run reads it. A stop is asked for through the log too, and by SIGTERM if the run does
not settle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from acp.helpers import update_current_mode
from acp.interfaces import Client
from acp.schema import StopReason

from kestrel.acp.asks import Asker
from kestrel.acp.modes import stop_reason
from kestrel.acp.updates import Renderer
from kestrel.agent.planning import Approve, Reject, mode_after_plan
from kestrel.protocol.events import (
    ApprovalRequested,
    ChangesApplied,
    ChangesReady,
    Event,
    PermissionMode,
    PlanProposed,
    Record,
    SessionFinished,
    SubagentStarted,
)
from kestrel.service.decisions import NotRunning, decide_plan, request_cancel
from kestrel.store.base import EventStore

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the log is read for a run's new events."""
CANCEL_GRACE_S = 10.0
"""How long a run asked to stop through the log may take before it gets SIGTERM."""
KILL_GRACE_S = 20.0
"""How long a run may take to settle after SIGTERM before it is killed."""
STDERR_LINES = 20
PLAN_REJECTED = "The person rejected the plan in their editor; their next message says why."


class RunFailed(Exception):
    """The run's process ended without finishing the session; the message says what it said."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """Which session runs, where, with what message, mode and model."""

    session_id: str
    cwd: Path
    message: str | None
    """A follow-up; None runs the task the session was created with."""
    mode: PermissionMode
    model: str | None = None


def run_command(spec: RunSpec) -> list[str]:
    """The command that runs the session once; after `--` the message is only an argument."""
    argv = [sys.executable, "-m", "kestrel", "resume", "-p", "--output-format", "json"]
    argv += ["--wait-for-approvals", "--permission-mode", spec.mode]
    if spec.model is not None:
        argv += ["--model", spec.model]
    return [*argv, "--", spec.session_id, *([spec.message] if spec.message else [])]


async def start_process(argv: list[str], cwd: Path) -> asyncio.subprocess.Process:
    """A Kestrel process in `cwd` that dies with this one; its standard output is dropped
    (ours carries only the protocol)."""
    env = dict(os.environ)
    env.update(KESTREL_DIE_WITH_PARENT=str(os.getpid()), PYTHONUNBUFFERED="1")
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


@dataclass(slots=True)
class PromptRun:
    """Runs a session once for a prompt and streams its events to the editor."""

    client: Client
    store: EventStore
    spec: RunSpec
    after_seq: int
    """The last record the editor has seen; the run's own begin after it."""
    cancelled: bool = False
    events: list[Event] = field(default_factory=list)
    _proc: asyncio.subprocess.Process | None = None
    _seen: int = 0
    """The last record rendered."""
    _said: list[str] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _renderer: Renderer = field(init=False)
    _asker: Asker = field(init=False)

    def __post_init__(self) -> None:
        self._renderer = Renderer(self.spec.session_id, self.spec.cwd)
        self._asker = Asker(self.client, self.store, self.spec.session_id, self.spec.cwd)

    async def run(self) -> StopReason:
        """Run to the end of the process; the stop reason of its finish."""
        if self.cancelled:  # Stopped before it started.
            return "cancelled"
        last = await self._run_process(run_command(self.spec))
        finished = next((e for e in reversed(self.events) if isinstance(e, SessionFinished)), None)
        if finished is None:
            if self.cancelled:
                return "cancelled"
            said = "\n".join(self._said[-STDERR_LINES:]) or "it said nothing"
            raise RunFailed(f"the session's run ended early:\n{said}")
        if finished.reason == "plan" and not self.cancelled:
            finished = await self._decide_plan(finished, last)
        if finished.reason == "done" and not self.cancelled and self._change_waits():
            await self._offer_apply(last)
        return "cancelled" if self.cancelled else stop_reason(finished, self.events)

    async def cancel(self) -> None:
        """Ask the run to stop through the log, then by SIGTERM if it lingers."""
        self.cancelled = True
        self._asker.cancel_all()
        if self._proc is None:  # Not started (its session may not even be logged yet): it won't.
            return
        try:
            request_cancel(self.store, self.spec.session_id, by="editor", reason="cancelled")
        except NotRunning:  # Its log says finished: a follow-up not logged yet, or its end.
            self._signal(signal.SIGTERM)
            return
        self._spawn(self._stop_if_lingering())

    async def finished(self) -> None:
        """Wait for the run's process to end."""
        if self._proc is not None:
            await self._proc.wait()

    async def _run_process(self, argv: list[str]) -> int:
        """Start `argv`, follow the session's log while it runs; the last record seen."""
        self._proc = await start_process(argv, self.spec.cwd)
        reader = asyncio.create_task(self._read_stderr(self._proc))
        follower = asyncio.create_task(self._follow(self.spec.session_id, self.after_seq))
        try:
            await self._proc.wait()
            await reader
            last = await self._catch_up(follower)
        finally:
            for task in (reader, follower, *self._tasks):
                task.cancel()
            await asyncio.gather(reader, follower, *self._tasks, return_exceptions=True)
            self._tasks.clear()
            self._asker.cancel_all()
        return last

    async def _follow(self, session_id: str, after_seq: int) -> None:
        """Render the session's records as they are logged, until cancelled."""
        last = after_seq
        while True:
            last = await self._render_new(session_id, last)
            await asyncio.sleep(POLL_S)

    async def _catch_up(self, follower: asyncio.Task[None]) -> int:
        """Stop following and render what the finished run logged last."""
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        return await self._render_new(self.spec.session_id, self._seen)

    async def _render_new(self, session_id: str, last: int) -> int:
        last = max(last, self._seen, self.after_seq)
        for record in self.store.read(session_id, last):
            await self._handle(record)
            last = self._seen = record.seq
        return last

    async def _handle(self, record: Record) -> None:
        event = record.event
        self.events.append(event)
        for update in self._renderer.render(record):
            await self.client.session_update(session_id=self.spec.session_id, update=update)
        if isinstance(event, ApprovalRequested):
            self._spawn(self._asker.ask(record.session_id, event))
        elif isinstance(event, SubagentStarted):
            self._spawn(self._follow_questions(event.child_session_id))

    async def _follow_questions(self, child_id: str) -> None:
        """A subagent's log: only its permission questions reach the editor."""
        last = 0
        while True:
            for record in self.store.read(child_id, last):
                last = record.seq
                if isinstance(record.event, ApprovalRequested):
                    self._spawn(self._asker.ask(child_id, record.event))
            await asyncio.sleep(POLL_S)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Keep the last lines the run said (for a run that fails) and log them."""
        assert proc.stderr is not None
        async for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._said = [*self._said[-STDERR_LINES:], line]
                logger.info("session %s: %s", self.spec.session_id, line)

    def _change_waits(self) -> bool:
        """Whether the run left its change ready for review rather than applied."""
        ready = [i for i, e in enumerate(self.events) if isinstance(e, ChangesReady)]
        if not ready:
            return False
        return not any(isinstance(e, ChangesApplied) for e in self.events[ready[-1] :])

    async def _offer_apply(self, last: int) -> None:
        """Ask the editor whether to apply the change; if so apply it (`kestrel apply ID`, a
        process of its own, as it opens the overlay) and show what became of it."""
        ready = next(e for e in reversed(self.events) if isinstance(e, ChangesReady))
        if not await self._asker.ask_apply(ready, last):
            return
        argv = [sys.executable, "-m", "kestrel", "apply", self.spec.session_id]
        await self._run_process(argv)

    async def _decide_plan(self, finished: SessionFinished, last: int) -> SessionFinished:
        """Put the plan the run proposed to the editor; run it when approved, in the mode the
        session continues in (never plan mode). A rejection is logged: the next prompt then
        says what to do instead."""
        plan = next((e for e in reversed(self.events) if isinstance(e, PlanProposed)), None)
        if plan is None:
            return finished
        approved = await self._asker.ask_plan(plan, last)
        if approved is None:
            return finished  # Left waiting: `kestrel plan approve|reject ID` decides it later.
        if not approved:
            decide_plan(self.store, self.spec.session_id, Reject(reason=PLAN_REJECTED))
            return finished
        mode = mode_after_plan(self.spec.mode, self.spec.mode)
        message = decide_plan(self.store, self.spec.session_id, Approve(mode=mode))
        self.spec = replace(self.spec, message=message, mode=mode)
        update = update_current_mode(mode)
        await self.client.session_update(session_id=self.spec.session_id, update=update)
        await self._run_process(run_command(self.spec))
        ends = [e for e in self.events if isinstance(e, SessionFinished)]
        return ends[-1]

    async def _stop_if_lingering(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), CANCEL_GRACE_S)
            return
        self._signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)
            return
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, number)

    def _spawn(self, work: object) -> None:
        assert asyncio.iscoroutine(work)
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
