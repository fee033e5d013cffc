"""The durable engine: DBOS, its system tables in the event log's PostgreSQL database.

One queue carries every session run. Its order is the plan's tier (DBOS runs lower priority
numbers first, so a higher tier gets a lower number) and then age; each worker takes at most
its number of slots, and each tenant (the queue's partition) at most its share at once across
the cluster. Workflows and steps are registered by name, so servers can enqueue a run without
importing the worker's code.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kestrel.protocol.errors import ConfigError

if TYPE_CHECKING:
    from dbos import DBOSConfig

QUEUE = "kestrel-sessions"
WORKFLOW = "kestrel.run_session"
SCHEMA = "kestrel_dbos"
"""The schema of the engine's own tables, beside the event log's `kestrel_` tables."""
TOP_PRIORITY = 100
"""The queue priority of tier 0; tier `t` gets `TOP_PRIORITY - t` (lower runs first)."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How this process joins the cluster."""

    database_url: str
    executor_id: str
    slots: int = 2
    """Runs this worker takes at once."""
    tenant_slots: int | None = None
    """Runs of one tenant at once, cluster-wide (None: no limit)."""


def app_version() -> str:
    """The version every executor of one cluster shares: a run is only taken over by a worker
    of the same version (the engine's rule), so it is Kestrel's release, not a code hash."""
    try:
        return "kestrel-" + importlib.metadata.version("kestrel")
    except importlib.metadata.PackageNotFoundError:
        return "kestrel-dev"


def priority_of(tier: int) -> int:
    """The queue priority of a plan's tier: higher tiers first."""
    return max(1, TOP_PRIORITY - tier)


def dbos_config(settings: EngineSettings) -> DBOSConfig:
    """The engine's configuration: no telemetry, no control plane, quiet logs."""
    return {
        "name": "kestrel",
        "system_database_url": settings.database_url,
        "executor_id": settings.executor_id,
        "application_version": app_version(),
        "dbos_system_schema": SCHEMA,
        "log_level": "WARNING",
        "enable_otlp": False,
    }


def require_dbos() -> Any:
    """The `dbos` module, or a clear error naming the extra that installs it."""
    try:
        import dbos
    except ImportError:
        raise ConfigError(
            "cluster mode needs the durable engine: pip install 'kestrel[cluster]'"
        ) from None
    return dbos


def register_queue(settings: EngineSettings) -> None:
    """Declare the sessions queue with this worker's limits (after launch, as DBOS asks)."""
    dbos = require_dbos()
    dbos.DBOS.register_queue(
        QUEUE,
        worker_concurrency=settings.slots,
        partition_concurrency=settings.tenant_slots,
        polling_interval_sec=0.2,
        on_conflict="always_update",
    )
