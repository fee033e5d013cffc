"""A session's run as a durable workflow: one step that drives the session's own process.

The step starts `kestrel resume ID [MESSAGE] -p --wait-for-approvals` in the session's checkout
and waits for it. Every model call and tool call inside is recorded in the session's event log
(PostgreSQL) before the next begins, so the log is the run's fine-grained journal: when a
worker dies mid-run the engine hands the workflow to another worker, the step runs again, and
the session's process resumes from its last logged step, as `kestrel resume` does after a
crash. Nothing recorded runs again; the one call in flight when the worker died is settled as
interrupted (a cut command's changes are rolled back) and the model sees that.

A step journal of the engine's own per model call would record each result twice, in two
databases that could disagree; the event log already has the ordering, the one-writer rule and
the resume logic that crash tests exercise.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kestrel.cluster.engine import WORKFLOW, require_dbos
from kestrel.cluster.step_watch import StepWatch
from kestrel.service.decisions import RUN_REQUESTED_AT
from kestrel.service.session_process import message_to_send, run_argv, run_env
from kestrel.store.base import EventStore

logger = logging.getLogger(__name__)

STEP = "kestrel.drive_session"


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One run of a session: what it sends and from which point of its log."""

    session_id: str
    tenant: str
    checkout: str
    """Where the session's process runs (the session's working directory)."""
    message: str | None = None
    mark: int = 0
    """The session's last seq when the run was asked for."""

    def as_args(self) -> dict[str, Any]:
        """The workflow's argument, as the engine stores it."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What every run on this worker shares."""

    data_dir: Path
    store_url: str
    open_store: Any
    """() -> EventStore: the cluster's event log."""
    metrics: Any = None
    """The worker's `WorkerMetrics`, when it serves them."""


class Children:
    """The session processes this worker runs, to kill them all when it must stop at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self.abandoned = threading.Event()
        """Set when this worker gives its runs up: no run may record an end after it."""

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self) -> None:
        """Give every run up: SIGKILL every session process group, without waiting."""
        self.abandoned.set()
        with self._lock:
            for proc in self._procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)


CHILDREN = Children()


CRASHES_RESUMED = 3
"""How many times a session process that died of a signal is resumed within one run."""


def drive(context: WorkerContext, run: RunRequest, workflow_id: str | None = None) -> int:
    """Run the session's process to its end; its exit code.

    A session a server hosts is moved to running in the server's registry first, and back to
    idle at the end, as the server's own pool does; a run the registry no longer wants (it was
    withdrawn, or another was asked for since) is not run at all (`NOT_RUN`). A process killed
    by a signal (the kernel's OOM killer, an operator) is resumed from its log, up to
    `CRASHES_RESUMED` times. Once the worker gives its runs up, no run returns: its end would
    be recorded as the run's, while another worker is taking the run over.
    """
    hosted = registry_begin(context.store_url, run.session_id, workflow_id)
    if hosted is False:
        logger.info("session %s: run %s was withdrawn; not run", run.session_id, workflow_id)
        return NOT_RUN
    started = time.monotonic()
    watch = None
    if context.metrics is not None:
        context.metrics.runs.inc()
        watch = StepWatch(context.open_store, run.session_id, run.mark, context.metrics).start()
    code = _drive_once(context, run)
    for _ in range(CRASHES_RESUMED):
        if code >= 0 or CHILDREN.abandoned.is_set():
            break
        logger.warning("session %s process died of signal %d; resuming it", run.session_id, -code)
        code = _drive_once(context, run)
    if CHILDREN.abandoned.is_set():
        threading.Event().wait()  # The worker is exiting; record nothing.
    if context.metrics is not None and watch is not None:
        watch.stop()
        context.metrics.run_seconds.observe(time.monotonic() - started)
    if hosted:
        registry_end(context.store_url, run.session_id, workflow_id)
    return code


NOT_RUN = 0
"""The exit code of a run the server's registry no longer wanted when a worker took it."""
REGISTRY = "kestrel_server.hosted"
"""The server's registry of hosted sessions (`kestrel.server.registry`), in the cluster's
database: a worker moves a run's session from queued to running and back to idle in it."""
_IS_HOSTED = "SELECT 1 FROM kestrel_server.hosted WHERE session_id = %s"
_BEGIN = (
    "UPDATE kestrel_server.hosted SET status = 'running', updated_at = %s"
    " WHERE session_id = %s AND run_id = %s AND status IN ('queued', 'running') RETURNING 1"
)
_END = (
    "UPDATE kestrel_server.hosted SET status = 'idle', next_message = NULL, updated_at = %s"
    " WHERE session_id = %s AND run_id = %s AND status = 'running'"
)


def registry_begin(url: str, session_id: str, workflow_id: str | None) -> bool | None:
    """Claim the session for this run in the server's registry: True when it is this run's
    (queued for it, or running it already: a run taken over from a dead worker), False when the
    registry moved on, None when no server hosts the session (a run queued by other means)."""
    if workflow_id is None:
        return None

    def claim(conn: Any) -> bool | None:
        if conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()[0] is None:
            return None
        if conn.execute(_BEGIN, (time.time(), session_id, workflow_id)).fetchone():
            return True
        return False if conn.execute(_IS_HOSTED, (session_id,)).fetchone() else None

    result: bool | None = _through_outage(url, claim)
    return result


def registry_end(url: str, session_id: str, workflow_id: str | None) -> None:
    """The run is over: the session is idle, unless the registry moved on meanwhile."""
    _through_outage(url, lambda conn: conn.execute(_END, (time.time(), session_id, workflow_id)))


OUTAGE_WAIT_S = 60.0
"""How long the registry's database is waited for at a run's start and end."""


def _through_outage(url: str, work: Any) -> Any:
    """`work(connection)` in one transaction, tried again while the database cannot be reached
    for up to `OUTAGE_WAIT_S`."""
    from kestrel.store.postgres_faults import StoreUnavailable, where
    from kestrel.store.postgres_link import Link

    link = Link(url, where(url), connect_timeout_s=5.0, autocommit=False)
    deadline, pause = time.monotonic() + OUTAGE_WAIT_S, 0.2
    try:
        while True:
            try:
                return link.run(work, commit=True)
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
    finally:
        link.close()


def _drive_once(context: WorkerContext, run: RunRequest) -> int:
    store: EventStore = context.open_store()
    try:
        message = message_to_send(store, run.session_id, run.message, run.mark)
    finally:
        store.close()
    logs = context.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    extra = {RUN_REQUESTED_AT: str(run.mark), "KESTREL_STORE_URL": context.store_url}
    with (logs / f"{run.session_id}.log").open("ab") as said:
        proc = subprocess.Popen(
            run_argv(run.session_id, message),
            cwd=run.checkout,
            env=run_env(context.data_dir, extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=said,
            start_new_session=True,
        )
    CHILDREN.add(proc)
    try:
        return proc.wait()
    finally:
        CHILDREN.discard(proc)


def register(context: WorkerContext) -> None:
    """Register the run workflow and its step with the engine (before it launches)."""
    require_dbos()  # A clear error when the extra is missing.
    from dbos import DBOS

    @DBOS.step(name=STEP, retries_allowed=False)
    def drive_step(args: dict[str, Any]) -> int:
        return drive(context, RunRequest(**args), DBOS.workflow_id)

    @DBOS.workflow(name=WORKFLOW)
    def run_session(args: dict[str, Any]) -> dict[str, Any]:
        code = drive_step(args)
        logger.info("session %s run ended with exit code %s", args["session_id"], code)
        return {"session_id": args["session_id"], "exit_code": code}
