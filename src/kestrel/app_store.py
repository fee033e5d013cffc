"""The parts of the composition root that light commands need (`kestrel --version`,
`kestrel sessions list`), kept apart from `app` so that they do not import the agent, the
tools, the sandbox and the model clients."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kestrel.protocol.messages import ToolResultTurn
from kestrel.store import STORE_FILE_NAME, default_data_dir

if TYPE_CHECKING:
    from kestrel.settings import Settings
    from kestrel.store.base import EventStore
    from kestrel.store.tombstones import ArchiveLog

S = TypeVar("S", bound="EventStore")


def version() -> str:
    """Kestrel's installed version."""
    try:
        return metadata.version("kestrel")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def data_dir(settings: Settings) -> Path:
    """Where sessions and their artifacts live."""
    return settings.data_dir or default_data_dir(os.environ)


def open_store(settings: Settings) -> EventStore:
    """The event store the settings choose (the SQLite file in the data directory unless
    `store_url` names a PostgreSQL database), once every apply that a killed process left half
    done is finished or rolled back (`kestrel.workspace.apply_lock`)."""
    return _settled(settings, open_log(settings))


def open_archive_log(settings: Settings) -> ArchiveLog:
    """The event log itself, settled as `open_store` does, for archiving sessions (which
    appends nothing, so there is nothing to publish)."""
    return _settled(settings, archive_log(settings))


def _settled(settings: Settings, store: S) -> S:
    from kestrel.protocol.errors import ConfigError
    from kestrel.workspace.apply_lock import finish_interrupted
    from kestrel.workspace.journal import ApplyError

    try:
        finish_interrupted(data_dir(settings), store)
    except ApplyError as exc:
        store.close()
        raise ConfigError(f"an interrupted apply could not be finished or undone: {exc}") from None
    return store


def open_log(settings: Settings) -> EventStore:
    """The event store alone: PostgreSQL at `store_url`, else SQLite in the data directory;
    with `redis_url`, each record appended is published there for live followers too."""
    from kestrel.app_redis import publishing

    return publishing(archive_log(settings), settings)


def archive_log(settings: Settings) -> ArchiveLog:
    """The event log itself: PostgreSQL at `store_url`, else SQLite in the data directory;
    either one restores an archived session the first time it is opened (see
    `kestrel.archive.restore`)."""
    from kestrel.archive.restore import Restorer

    restorer = Restorer(data_dir(settings))
    if settings.store_url is not None:
        from kestrel.store.postgres import PostgresStore

        return PostgresStore(
            settings.store_url, outage_wait_s=settings.store_outage_wait_s, restorer=restorer
        )
    from kestrel.store.sqlite import SQLiteStore

    return SQLiteStore(data_dir(settings) / STORE_FILE_NAME, restorer=restorer)


def store_output(artifacts_dir: Path, result: ToolResultTurn) -> str:
    """Write a tool output that compaction moves out of the conversation; its path, which
    `read_file` may read."""
    folder = artifacts_dir / "outputs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_safe_name(result.call_id)}.txt"
    path.write_text(result.content, encoding="utf-8", errors="replace")
    return str(path)


def _safe_name(call_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:80] or "output"
