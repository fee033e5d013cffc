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
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.server.queue import FairQueue
from kestrel.server.registry import Hosted, Registry

ENV_PASSED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "PYTHONPATH",
    "KESTREL_SANDBOX",
    # The model providers' keys: the session's process calls the model with them; the sandbox
    # keeps them from every command it runs.
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)
"""The server's environment variables a session's process sees; nothing else."""


@dataclass(slots=True)
class Pool:
    """Runs queued sessions, `size` at a time."""

    registry: Registry
    data_dir: Path
    size: int = 2
    max_running: Callable[[str], int | None] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    queue: FairQueue[str] = field(init=False)
    _tenants: dict[str, str] = field(default_factory=dict)
    _running: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    _workers: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: bool = False

    def __post_init__(self) -> None:
        self.queue = FairQueue(max_running=self.max_running)

    def start(self) -> None:
        """Queue again what a stopped server left unfinished, then start the workers."""
        for hosted in self.registry.unfinished():
            self._put(hosted)
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.size)]

    def submit(self, hosted: Hosted, message: str | None = None) -> None:
        """Queue a session's next run, with the message it sends (None: continue as logged)."""
        self.registry.set_status(hosted.session_id, "queued", next_message=message)
        self._put(hosted)

    def withdraw(self, session_id: str) -> bool:
        """Take a queued session out of the queue; False when it is not queued."""
        return self.queue.remove(session_id)

    def is_running(self, session_id: str) -> bool:
        """Whether a worker runs the session now."""
        return session_id in self._running

    async def stop(self, grace_s: float = 20.0) -> None:
        """Stop taking work; ask running sessions to stop (SIGTERM) and wait for them."""
        self._stopping = True
        for proc in list(self._running.values()):
            with contextlib.suppress(ProcessLookupError):
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
        self.registry.set_status(session_id, "running", next_message=hosted.next_message)
        argv = [sys.executable, "-m", "kestrel", "resume", session_id]
        if hosted.next_message:
            argv.append(hosted.next_message)
        argv += ["-p", "--output-format", "json", "--wait-for-approvals"]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=hosted.checkout,
            env=self._env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_server,
        )
        self._running[session_id] = proc
        try:
            await proc.wait()
        finally:
            del self._running[session_id]
        if not self._stopping:  # A stopped server resumes it on the next start.
            self.registry.set_status(session_id, "idle")

    def _env(self) -> dict[str, str]:
        home = self.data_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k in ENV_PASSED}
        env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            KESTREL_DATA_DIR=str(self.data_dir),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        return env


def _die_with_server() -> None:
    """In the session's process, before it runs: killed when the server dies (even by SIGKILL),
    so no session runs unseen. Its log resumes it on the next start exactly as after a crash: a
    question it waited on is asked again (an answer given meanwhile counts) and a cut command is
    rolled back. A server that is stopped (SIGTERM) stops its sessions gently instead."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
