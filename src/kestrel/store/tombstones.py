"""What the event log keeps of a session whose data went to cold storage: its tombstone.

Archiving a session (`kestrel.archive`) moves its event rows, checkpoints and workspace into
one object of an object store. The log keeps the session's row, with status `archived`, so
listings still show it, and a tombstone: where the object is, its checksum, and what the
session's summary said before (its status, last event number, cost and parent). The rows are
put back, exactly as they were, by `reinstate`, once the object is fetched and checked.

A store opened with a `Restorer` brings an archived session back the first time anything
reads it, appends to it or follows it; without one, those calls raise `SessionArchived`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Protocol

from kestrel.protocol.errors import StoreError
from kestrel.store.base import EventStore, SessionSummary

ARCHIVED = "archived"
"""The status `sessions()` lists an archived session with."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRow:
    """One event row as the log holds it: number, time, type and the record's JSON text."""

    seq: int
    at: float
    type: str
    json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """Where an archived session's data went, and the summary it is listed with meanwhile."""

    session_id: str
    location: str
    """The URL of the session's object (`file:///…` or `s3://bucket/key`)."""
    digest: str
    """The SHA-256 of the object's bytes, hex."""
    size: int
    archived_at: float
    status: str
    """The session's status before it was archived; it gets it back when restored."""
    last_seq: int
    rows: int
    """How many event rows the object holds (fewer than `last_seq` when some were set aside)."""
    cost_usd: float = 0.0
    turns: int = 0
    cost_known: bool = True
    parent_session_id: str | None = None

    def to_json(self) -> str:
        """The tombstone as one line of JSON, as the stores keep it."""
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Tombstone:
        """The tombstone a `to_json` line describes."""
        return cls(**json.loads(text))


class SessionArchived(StoreError):
    """The session is in cold storage and this store has no way to bring it back."""

    def __init__(self, tombstone: Tombstone) -> None:
        super().__init__(
            f"session {tombstone.session_id} is archived (at {tombstone.location}); open it "
            "with a Kestrel whose store restores archived sessions",
            session_id=None,
        )
        self.tombstone = tombstone


class ArchiveConflict(StoreError):
    """The session changed (or was archived or restored) between packing and burying it."""


class ArchiveLog(EventStore, Protocol):
    """An event store that can hand over a session's rows, bury them and take them back."""

    def rows(self, session_id: str) -> Sequence[StoredRow]:
        """Every event row of the session, in order, exactly as stored."""
        ...

    def tombstone(self, session_id: str) -> Tombstone | None:
        """The session's tombstone, or None when it is not archived."""
        ...

    def bury(self, tombstone: Tombstone) -> None:
        """In one transaction: delete the session's rows and keep `tombstone` instead.

        Raises `ArchiveConflict`, changing nothing, unless the session still has the status
        and last event number the tombstone records.
        """
        ...

    def reinstate(self, tombstone: Tombstone, rows: Sequence[StoredRow]) -> bool:
        """In one transaction: put `rows` back and drop the tombstone; False (and nothing done)
        when the session is no longer archived (another process restored it first)."""
        ...


class Restorer(Protocol):
    """Brings an archived session's data back, then calls `store.reinstate`."""

    def __call__(self, store: ArchiveLog, tombstone: Tombstone) -> None:
        """Restore the session `tombstone` names into `store`, or raise a `StoreError`."""
        ...


def listed(
    summaries: Sequence[SessionSummary], tombstones: Mapping[str, Tombstone]
) -> list[SessionSummary]:
    """`summaries` with each archived session's spend and parent taken from its tombstone (its
    rows, where the store reads them from, are in the archive)."""
    out = []
    for summary in summaries:
        grave = tombstones.get(summary.session_id)
        if grave is not None:
            summary = replace(
                summary,
                cost_usd=grave.cost_usd,
                turns=grave.turns,
                cost_known=grave.cost_known,
                parent_session_id=grave.parent_session_id,
            )
        out.append(summary)
    return out


def restore_with(restorer: Restorer | None, store: ArchiveLog, tombstone: Tombstone) -> None:
    """Restore through `restorer`, or say that this store cannot."""
    if restorer is None:
        raise SessionArchived(tombstone)
    restorer(store, tombstone)
    if store.tombstone(tombstone.session_id) is not None:
        raise StoreError(f"session {tombstone.session_id} is archived and was not restored")
