"""The worker pool: each worker takes the next session from the fair queue and runs it as a
process of its own (`kestrel resume ID [MESSAGE] -p --wait-for-approvals`).

A process per session gives each its own sandbox and mount namespace (an overlay can only be
entered by a single-threaded process), and a session that crashes takes nothing else with it.
The session's events reach clients through the shared log; the worker only waits for the
process. On shutdown running processes get SIGTERM and settle their sessions as cancelled; on
the next start every session left queued or running is queued again and resumed from its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.server.interfaces import HostedLog
from kestrel.server.queue import FairQueue
from kestrel.server.registry import Hosted, Registry, Status
from kestrel.service.decisions import RUN_REQUESTED_AT, status_of
from kestrel.service.session_process import message_to_send, run_argv, run_env

OVERDUE_GRACE_S = 60.0
"""How long past its plan's wall time a run may go before the server stops it."""


async def _stop(proc: asyncio.subprocess.Process, grace_s: float = 20.0) -> None:
    """SIGTERM (the session settles as cancelled), then SIGKILL if it does not end in time."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


@dataclass(slots=True)
class Pool:
    """Runs queued sessions, `size` at a time."""

    registry: Registry
    store: HostedLog
    data_dir: Path
    size: int = 2
    max_running: Callable[[str], int | None] | None = None
    max_wall_s: Callable[[str], float | None] | None = None
    """The longest a run of the tenant's session may take; its own budget stops it first (the
    plan caps it), this stops a run its budget could not (a command that hangs, say)."""
    extra_env: dict[str, str] = field(default_factory=dict)
    queue: FairQueue[str] = field(init=False)
    _tenants: dict[str, str] = field(default_factory=dict)
    _running: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    _workers: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: bool = False
    _loop: asyncio.AbstractEventLoop | None = None

    def __post_init__(self) -> None:
        self.queue = FairQueue(max_running=self.max_running)

    def start(self) -> None:
        """Queue again what a stopped server left unfinished, then start the workers."""
        self._loop = asyncio.get_running_loop()
        for hosted in self.registry.unfinished():
            # A run cut short is queued again with what it was sent and when (`_message`).
            self.registry.set_status(
                hosted.session_id,
                "queued",
                next_message=hosted.next_message,
                sent_after=hosted.sent_after,
            )
            self._put(hosted)
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.size)]

    def submit(
        self, hosted: Hosted, message: str | None = None, *, only_if: Status | None = None
    ) -> bool:
        """Queue a session's next run, with the message it sends (None: continue as logged).

        With `only_if`, only a session in that status is queued (False otherwise), decided at
        once for every thread. Safe to call from any thread.
        """
        if not self.registry.claim(hosted.session_id, only_if, "queued", next_message=message):
            return False
        self._on_loop(self._put, hosted)
        return True

    async def withdraw(self, session_id: str) -> bool:
        """Take a queued session out of the queue; False when it is not queued."""
        return self.queue.remove(session_id)

    def _on_loop(self, call: Callable[[Hosted], None], hosted: Hosted) -> None:
        # The queue belongs to the event loop; routes that block run in other threads.
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if self._loop is None or here is self._loop:
            call(hosted)
        else:
            self._loop.call_soon_threadsafe(call, hosted)

    def is_running(self, session_id: str) -> bool:
        """Whether a worker runs the session now."""
        return session_id in self._running

    async def terminate(self, session_id: str) -> bool:
        """Stop the session's process as SIGTERM does (it settles as cancelled); False when no
        process runs it. For a run that has not logged its start yet, which a cancel event
        would not reach."""
        proc = self._running.get(session_id)
        if proc is None or proc.returncode is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        return True

    def workers(self) -> int:
        """The pool's size: how many sessions it runs at once."""
        return self.size

    async def stop(self, grace_s: float = 20.0) -> None:
        """Stop taking work; ask running sessions to stop (SIGTERM) and wait for them.

        A session that waits for a person's answer is ended at once instead (SIGKILL): nothing
        runs in it, so its log resumes it on the next start with the question still open, as
        after a crash. Stopped gently it would settle the question as interrupted, and a
        restart of the server would change how the session goes on.
        """
        self._stopping = True
        for session_id, proc in list(self._running.items()):
            waits_on = await asyncio.to_thread(status_of, self.store, session_id)
            with contextlib.suppress(ProcessLookupError):
                if waits_on.waiting_on == "approval":
                    proc.kill()
                else:
                    proc.send_signal(signal.SIGTERM)
        waits = [proc.wait() for proc in self._running.values()]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), grace_s)
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _put(self, hosted: Hosted) -> None:
        if hosted.session_id in self._running or self.queue.position(hosted.session_id) is not None:
            return  # Queued or running already: it runs once.
        self._tenants[hosted.session_id] = hosted.tenant_id
        self.queue.put(hosted.session_id, tier=hosted.tier, tenant=hosted.tenant_id)

    async def _work(self) -> None:
        while not self._stopping:
            session_id = await self.queue.get()
            tenant = self._tenants[session_id]
            try:
                await self._run(session_id, tenant)
            finally:
                self.queue.finished(tenant)

    async def _run(self, session_id: str, tenant: str) -> None:
        hosted = self.registry.get(tenant, session_id)
        if hosted is None:
            return
        message = self._message(hosted)
        mark = self.store.last_seqs([session_id]).get(session_id, 0)
        if not self.registry.claim(
            session_id, "queued", "running", next_message=message, sent_after=mark
        ):
            return  # Cancelled while it waited.
        argv = run_argv(session_id, message)
        logs = self.data_dir / "logs"
        logs.mkdir(exist_ok=True)
        # What the process says goes to a file per session, for the operator: a crash leaves
        # its traceback there rather than nowhere. The events clients see are in the log.
        with (logs / f"{session_id}.log").open("ab") as said:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=hosted.checkout,
                env=run_env(self.data_dir, {**self.extra_env, RUN_REQUESTED_AT: str(mark)}),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=said,
                start_new_session=True,
            )
        self._running[session_id] = proc
        limit = None if self.max_wall_s is None else self.max_wall_s(tenant)
        try:
            await asyncio.wait_for(proc.wait(), None if limit is None else limit + OVERDUE_GRACE_S)
        except TimeoutError:
            await _stop(proc)
        finally:
            del self._running[session_id]
        if not self._stopping:  # A stopped server resumes it on the next start.
            self.registry.set_status(session_id, "idle")

    def _message(self, hosted: Hosted) -> str | None:
        """The message this run sends: none when a run cut short had already logged it."""
        return message_to_send(
            self.store, hosted.session_id, hosted.next_message, hosted.sent_after
        )
