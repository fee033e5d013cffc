"""`kestrel worker`: one stateless member of the cluster, running session runs off the queue.

It joins the engine under a fresh executor id, beats in the liveness table, takes runs up to
its slots, and takes over the runs of workers that die. It keeps nothing of its own: a run's
state is the session's event log and workspace, so killing a worker at any moment costs the
sessions it ran a few seconds. SIGTERM and SIGINT stop it the same way on purpose: its session
processes are ended and its runs are left to the others, which take them over once its
heartbeat is missed (a stop that waited for every run would hold a deploy for as long as the
longest task).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kestrel.cluster.engine import EngineSettings, dbos_config, register_queue, require_dbos
from kestrel.cluster.liveness import Supervisor
from kestrel.cluster.metrics import WorkerMetrics
from kestrel.cluster.runs import CHILDREN, WorkerContext, register

logger = logging.getLogger(__name__)

EXIT_EVICTED = 75
"""The exit code of a worker the others took for dead (a process manager restarts it)."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What `kestrel worker` was asked for."""

    store_url: str
    data_dir: Path
    slots: int = 2
    tenant_slots: int | None = None
    executor_id: str | None = None
    metrics_port: int | None = None
    """Serve Prometheus metrics on this loopback port (None: not at all)."""


def new_executor_id() -> str:
    """A fresh id for this process: host, pid and a random part, readable in the tables."""
    return f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _evicted() -> None:
    CHILDREN.kill_all()
    os._exit(EXIT_EVICTED)


def recover(executor_ids: list[str], metrics: WorkerMetrics | None = None) -> int:
    """Put the dead executors' pending runs back on the queue; how many.

    The engine's `_recover_pending_workflows` is not part of its public interface: the package
    is pinned to one release, and the failover tests exercise this call.
    """
    dbos = require_dbos().DBOS
    count = len(dbos._recover_pending_workflows(executor_ids))
    if metrics is not None:
        metrics.takeovers.inc(count)
    return count


def run_worker(
    options: WorkerOptions, open_store: Callable[[], Any], ready: Callable[[str], None]
) -> None:
    """Serve runs until SIGTERM or SIGINT; `ready(executor_id)` once the worker takes work."""
    dbos = require_dbos().DBOS
    engine = EngineSettings(
        database_url=options.store_url,
        executor_id=options.executor_id or new_executor_id(),
        slots=options.slots,
        tenant_slots=options.tenant_slots,
    )
    metrics = None
    if options.metrics_port is not None:
        metrics = WorkerMetrics(options.store_url)
        metrics.serve(options.metrics_port)
    register(WorkerContext(options.data_dir, options.store_url, open_store, metrics))
    dbos(config=dbos_config(engine))
    dbos.launch()
    register_queue(engine)
    supervisor = Supervisor(
        options.store_url,
        engine.executor_id,
        recover=lambda ids: recover(ids, metrics),
        on_evicted=_evicted,
    )
    supervisor.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    ready(engine.executor_id)
    while not stop.wait(1.0):
        pass
    logger.warning("stopping: this worker's runs go to the others")
    CHILDREN.kill_all()
    os._exit(0)  # Not `destroy()`: that would wait for the runs it just ended.
