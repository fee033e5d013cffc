"""`kestrel worker`: run sessions off the cluster's queue (see docs/deploy.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError

Slots = Annotated[
    int, typer.Option("--slots", min=1, help="Session runs this worker takes at once.")
]
TenantSlots = Annotated[
    int | None,
    typer.Option(
        "--tenant-slots", min=1, help="Runs of one tenant at once, across the whole cluster."
    ),
]
MetricsPort = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=1,
        max=65535,
        help="Serve Prometheus metrics (queue by tier, runs, workers, failovers) on this "
        "loopback port.",
    ),
]
ExecutorId = Annotated[
    str | None,
    typer.Option("--id", help="This worker's id in the cluster (default: host, pid, random)."),
]


def worker_command(
    slots: Slots = 2,
    tenant_slots: TenantSlots = None,
    executor_id: ExecutorId = None,
    metrics_port: MetricsPort = None,
) -> None:
    """Join the cluster whose event log is `store_url` (or KESTREL_STORE_URL) and run its queued
    sessions; SIGTERM hands this worker's runs to the others. Any number of workers may run, on
    any machines that share the database and the data directory."""
    from kestrel.app_store import data_dir, open_log
    from kestrel.cluster.worker import WorkerOptions, run_worker
    from kestrel.service.sessions import settings_for

    try:
        settings = settings_for(Path.cwd(), {})
        if settings.store_url is None:
            raise ConfigError(
                "a worker needs the cluster's PostgreSQL database: set store_url in the "
                "settings or KESTREL_STORE_URL=postgresql://…"
            )
        options = WorkerOptions(
            store_url=settings.store_url,
            data_dir=data_dir(settings),
            slots=slots,
            tenant_slots=tenant_slots,
            executor_id=executor_id,
            metrics_port=metrics_port,
        )
        run_worker(options, lambda: open_log(settings), _say_ready(slots))
    except ConfigError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None


def _say_ready(slots: int) -> Callable[[str], None]:
    def ready(executor_id: str) -> None:
        print(f"kestrel worker {executor_id}: ready, {slots} slot(s)", file=sys.stderr, flush=True)

    return ready
