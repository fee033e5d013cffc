"""The append-only event log: the `EventStore` interface; SQLite, PostgreSQL and in-memory
implementations."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kestrel.lazy_names import lazy_attributes
from kestrel.store._common import StoreError
from kestrel.store.base import EventStore, SessionSummary, Spend

if TYPE_CHECKING:
    from kestrel.store.memory import MemoryStore as MemoryStore
    from kestrel.store.postgres import PostgresStore as PostgresStore
    from kestrel.store.postgres_faults import SessionBusy as SessionBusy
    from kestrel.store.postgres_faults import StoreUnavailable as StoreUnavailable
    from kestrel.store.sqlite import STORE_SCHEMA_VERSION as STORE_SCHEMA_VERSION
    from kestrel.store.sqlite import SQLiteStore as SQLiteStore

# The stores themselves are imported when first used (`kestrel --version` needs neither).
__getattr__ = lazy_attributes(
    __name__,
    {
        "MemoryStore": "memory",
        "PostgresStore": "postgres",
        "SQLiteStore": "sqlite",
        "STORE_SCHEMA_VERSION": "sqlite",
        "SessionBusy": "postgres_faults",
        "StoreUnavailable": "postgres_faults",
    },
)

STORE_FILE_NAME = "sessions.db"
"""The local event store's file name inside the data directory."""


def default_data_dir(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """`$KESTREL_DATA_DIR`, else `$XDG_DATA_HOME/kestrel`, else `~/.local/share/kestrel`."""
    env = os.environ if env is None else env
    if explicit := env.get("KESTREL_DATA_DIR"):
        return Path(explicit).expanduser()
    # The XDG spec says to ignore a relative XDG_DATA_HOME.
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "kestrel"
    return (Path.home() if home is None else home) / ".local" / "share" / "kestrel"


def default_store_path(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """The local event store: `sessions.db` in `default_data_dir()`, read on each call."""
    return default_data_dir(env, home) / STORE_FILE_NAME


__all__ = [
    "STORE_FILE_NAME",
    "STORE_SCHEMA_VERSION",
    "EventStore",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "SessionBusy",
    "SessionSummary",
    "Spend",
    "StoreError",
    "StoreUnavailable",
    "default_data_dir",
    "default_store_path",
]
