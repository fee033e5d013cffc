"""Moving idle sessions to cold storage, one object each, losing nothing on the way.

For each session, under its lock in the data directory (so no apply, discard or restore of it
runs meanwhile): refuse it if it is running or waits for an answer, or has a change not applied
yet (unless forced); pack its rows, checkpoints and folders into one object; upload it; read it
back and compare checksums; then, in one transaction, swap its rows for a tombstone, which
fails if the session moved on meanwhile; only then delete its local folders, checkpoint refs
and indexes. A failure before the tombstone leaves the session as it was; the object, if it was
stored, is replaced by the next archive of the session.
"""

from __future__ import annotations

import hashlib
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.archive import checkpoints, files
from kestrel.archive.blobs import Blobs
from kestrel.archive.errors import ArchiveUnavailable
from kestrel.archive.pack import Session, build
from kestrel.archive.restore import work_folder
from kestrel.protocol.events import CheckpointCreated, Event, Rewound
from kestrel.store.base import SessionSummary
from kestrel.store.tombstones import ARCHIVED, ArchiveConflict, ArchiveLog, Tombstone
from kestrel.workspace.handoff import applied_base
from kestrel.workspace.overlay import layer_for
from kestrel.workspace.shadow_git import CheckpointError

ACTIVE = ("running", "waiting")
"""Statuses of a session that has not finished: a process may be running it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Archived:
    """A session now in cold storage."""

    session_id: str
    location: str
    size: int
    note: str = ""
    """What could not be cleaned up locally (it is replaced on restore), if anything."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """A session left as it was, and why."""

    session_id: str
    reason: str


def idle(summaries: Sequence[SessionSummary], idle_s: float, now: float) -> list[SessionSummary]:
    """The sessions not yet archived whose last event is at least `idle_s` old, oldest first."""
    old = [s for s in summaries if s.status != ARCHIVED and now - s.updated_at >= idle_s]
    return sorted(old, key=lambda s: s.updated_at)


def refusal(summary: SessionSummary, events: Sequence[Event], *, layer: bool) -> str | None:
    """Why the session must not be archived unasked: it may be running, or its overlay (`layer`
    exists) holds a change not applied yet. None when it may."""
    sid = summary.session_id
    if summary.status in ACTIVE:
        return f"is {summary.status}; archive it once it has finished (or with --force)"
    if layer and change_pending(events):
        return (
            f"has a change not applied yet (kestrel diff {sid}); apply or discard it first "
            "(or archive it with --force)"
        )
    return None


def change_pending(events: Sequence[Event]) -> bool:
    """Whether the files the session's checkpoints end at (its newest checkpoint, or the one it
    rewound to) differ from where its last hand-over left them."""
    trees: dict[str, str] = {}
    head = None
    for event in events:
        if isinstance(event, CheckpointCreated):
            if event.tree:
                trees.setdefault(event.checkpoint_id, event.tree)
            if not event.baseline:
                head = event.checkpoint_id
        elif isinstance(event, Rewound):
            head = event.checkpoint_id
    base = applied_base(events)
    if head is None or head == base:
        return False
    return base is None or not trees.get(head) or trees.get(head) != trees.get(base)


class Archiver:
    """Archives sessions of one store and data directory to one place."""

    def __init__(
        self,
        store: ArchiveLog,
        data_dir: Path,
        blobs: Blobs,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._data_dir = data_dir
        self._blobs = blobs
        self._clock = clock

    def archive(self, summary: SessionSummary, *, force: bool = False) -> Archived | Skipped:
        """Archive one session, or say why not; `ArchiveUnavailable` when the object store
        failed (nothing of the session was removed)."""
        from kestrel.workspace.apply_lock import ApplyBusy, session_lock

        sid = summary.session_id
        if summary.status == ARCHIVED:
            return Skipped(session_id=sid, reason="is archived already")
        try:
            with session_lock(self._data_dir, sid, wait_s=0):
                return self._archive_locked(summary, force)
        except ApplyBusy:
            return Skipped(session_id=sid, reason="another process is applying or archiving it")
        except ArchiveConflict as exc:
            return Skipped(session_id=sid, reason=str(exc).removeprefix(f"session {sid} "))

    def _archive_locked(self, summary: SessionSummary, force: bool) -> Archived | Skipped:
        sid = summary.session_id
        events = [record.event for record in self._store.read(sid)]
        layer = layer_for(self._data_dir, sid).exists()
        why = None if force else refusal(summary, events, layer=layer)
        if why is not None:
            return Skipped(session_id=sid, reason=why)
        key = f"{sid}.tar.gz"
        location = self._blobs.place.location(key)
        with work_folder(self._data_dir) as work:
            (work / "bundles").mkdir()
            packed = work / key
            session = Session(
                session_id=sid,
                status=summary.status,
                last_seq=summary.events,
                archived_at=self._clock(),
                rows=list(self._store.rows(sid)),
            )
            try:
                manifest = build(session, self._data_dir, work / "bundles", packed)
            except (OSError, CheckpointError, tarfile.TarError) as exc:
                return Skipped(session_id=sid, reason=f"cannot be packed: {exc}")
            digest, size = _sha256(packed), packed.stat().st_size
            self._upload(sid, key, packed, digest)
        self._store.bury(_tombstone(summary, session, location, digest, size, manifest.rows))
        return Archived(
            session_id=sid, location=location, size=size, note=self._clean(sid, manifest.folders)
        )

    def _upload(self, sid: str, key: str, packed: Path, digest: str) -> None:
        """Store the object and read it back; `ArchiveUnavailable` unless it is the same."""
        location = self._blobs.place.location(key)
        try:
            self._blobs.put(key, packed)
            back, _ = self._blobs.fetch(key)
        except ArchiveUnavailable as exc:
            raise ArchiveUnavailable(
                f"session {sid} was not archived, and nothing of it was removed: {exc}"
            ) from None
        if back != digest:
            raise ArchiveUnavailable(
                f"session {sid} was not archived, and nothing of it was removed: {location} "
                "does not read back as it was written"
            )

    def _clean(self, sid: str, folders: list[str]) -> str:
        """Delete what the archive now holds; what could not be, as a note."""
        try:
            checkpoints.remove(self._data_dir, sid)
        except (CheckpointError, OSError) as exc:
            return f"its checkpoints stay in the data directory ({exc})"
        files.remove(self._data_dir, folders)
        return ""


def _tombstone(
    summary: SessionSummary, session: Session, location: str, digest: str, size: int, rows: int
) -> Tombstone:
    return Tombstone(
        session_id=summary.session_id,
        location=location,
        digest=digest,
        size=size,
        archived_at=session.archived_at,
        status=summary.status,
        last_seq=summary.events,
        rows=rows,
        cost_usd=summary.cost_usd,
        turns=summary.turns,
        cost_known=summary.cost_known,
        parent_session_id=summary.parent_session_id,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
