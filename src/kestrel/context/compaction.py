"""Keeping the snapshot an index is served from up to date as files change.

An index served from its snapshot (reopened, or built whole at 20,000 files or more) takes each
later change into memory: the file's record decoded, its postings in small segments, and the
snapshot's copy masked. A reopen reads those files' rows again and posts them anew (0.44 s per
1,000 files at 250,000), and once more than a tenth of the files have changed the snapshot is
not used at all: every row is decoded and the postings built whole, minutes and gigabytes on a
big tree. So once `COMPACT_MIN_FILES` files have changed since the last snapshot written, a
new one is written on the snapshot writer's thread from the stored bodies and the changed
records (`kestrel.context.whole.written_whole`: no body of the old snapshot is decoded), and
served in place of what memory holds, unless files changed meanwhile. The snapshot on disk is
the index as saved when the write began either way, so the next open reads only what changed
after. Closing the engine stops a write under way (the next open reads those rows instead of
waiting for it), and queries, refreshes and background reads go first between its steps. At
250,481 files the write takes 28-30 s of the writer's thread and about 830 MB of anonymous
memory at the peak, against 215 MB once served (docs/benchmarks.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kestrel.context.index_store import FileRecord, IndexStore
from kestrel.context.lexical import Vocabulary
from kestrel.context.loading import Loaded, SnapshotWriter
from kestrel.context.postings import Postings
from kestrel.context.record import KindsOf
from kestrel.context.turns import Job, Turns, release_freed, settle
from kestrel.context.whole import written_whole

COMPACT_MIN_FILES = 500
"""Files changed (or removed) since the last snapshot written that make a new one worth writing:
as many as a reopen decodes in about a fifth of a second."""

_PAUSE_S = 0.02
"""How often a paused write looks whether the refresh before it is done."""

_Work = tuple[dict[str, FileRecord], Vocabulary, tuple[str, int], set[str]]


class Compacting:
    """Writes a fresh snapshot when enough files changed since the last one."""

    _store: IndexStore
    _vocab: Vocabulary
    _records: dict[str, FileRecord]
    _post: Postings
    _pending: set[str]
    _building: set[str] | None
    _job: Job | None
    _lock: threading.RLock
    _snapshots: SnapshotWriter
    _unsaved: int
    _turns: Turns
    _compaction_stop: threading.Event
    """Set on closing: a snapshot being written gives up at its next column."""
    _failed_at = 0
    """How many changed files there were when a write last failed (a full disk, say): the next
    is tried once `COMPACT_MIN_FILES` more have changed, not after every read."""
    _changed_since_written: set[str]
    """Paths changed or removed since the point of the last snapshot written (or being written):
    what a reopen would read from the rows."""
    _kinds: KindsOf
    lightened: bool
    _has_vectors: Callable[[FileRecord], bool]

    def _serve_loaded(self, loaded: Loaded) -> None:
        """Serve the records and postings of a snapshot this process just wrote."""
        self._records, self._post, self._vocab = loaded.records, loaded.post, loaded.vocab
        self._kinds = KindsOf(self._records)
        self._changed_since_written = set()
        self.lightened = True

    def _maybe_compact(self) -> bool:
        """Begin writing a new snapshot when enough changed since the last one (when no read
        is under way); True when begun."""
        with self._lock:
            if self._snapshots.busy:
                return False  # the writer takes this up when it is done
            work = self._work_due()
            return work is not None and self._snapshots.run(lambda: self._compact(work))

    def _work_due(self) -> list[_Work] | None:
        """Under the lock: the records to write a new snapshot of, when one is due. Handed over
        in a list the writer empties, so that nothing keeps them alive after a swap."""
        due = len(self._changed_since_written) - self._failed_at >= COMPACT_MIN_FILES
        if not due or not self._quiet():
            return None
        if self._compaction_stop.is_set():
            return None
        if self._post.source is None or self._store.path is None:
            return None
        point = self._store.snapshot_point()  # with the records: saves hold the lock
        if point is None:
            return None  # another process wrote to the index: its next open sorts it out
        before, self._changed_since_written, self._failed_at = self._changed_since_written, set(), 0
        return [(dict(self._records), self._vocab, point, before)]

    def _quiet(self) -> bool:
        """Whether every record is saved and no read or rebuild is under way."""
        return (
            self._job is None and not self._pending and self._building is None and not self._unsaved
        )

    def _compact(self, work: list[_Work]) -> None:
        """On the writer's thread: write snapshots while they are due (files changed while one
        was written may make another due), serving each when nothing changed since."""
        while work:
            served = self._compact_once(work)
            if served is None or self._snapshots.joining.is_set():
                return  # not written (tried again after the next read), or being closed
            if served:
                release_freed()  # the decoded records, now that nothing holds them
                settle()
            if not self._locked():
                return
            try:
                work = self._work_due() or []
            finally:
                self._lock.release()

    def _compact_once(self, work: list[_Work]) -> bool | None:
        """Write one snapshot; True when it is served, None when it could not be written."""
        records, vocab, point, before = work.pop()
        try:
            step = self._between_steps
            loaded = written_whole(self._store, vocab, records, self._has_vectors, point, step)
        except Exception:  # a cache: the index serves on as it is, the next open as before
            loaded = None
        if not self._locked():
            return None if loaded is None else False
        try:
            if loaded is None:
                self._changed_since_written |= before  # still to be read on the next open
                self._failed_at = len(self._changed_since_written)
                return None
            same = self._quiet() and len(self._records) == len(records)
            if not same or any(self._records.get(p) is not r for p, r in records.items()):
                return False
            self._serve_loaded(loaded)
            return True
        finally:
            self._lock.release()

    def _between_steps(self) -> bool:
        """Between steps of a write: queries and reads go first (a refresh holds the lock while
        it reads: a 1,000-file checkout took twice as long beside a write at 250,000 files);
        True when the write is to stop."""
        self._turns.give_way()
        while not self._compaction_stop.is_set() and not self._snapshots.joining.is_set():
            if self._job is None and self._lock.acquire(blocking=False):
                self._lock.release()
                break
            time.sleep(_PAUSE_S)
        return self._compaction_stop.is_set()

    def _locked(self) -> bool:
        """Take the lock on the writer's thread; False (not taken) when whoever holds it waits
        for this thread, as closing does."""
        while not self._lock.acquire(timeout=0.05):
            if self._snapshots.joining.is_set():
                return False
        return True

    @property
    def writing_snapshot(self) -> bool:
        """Whether a snapshot is being written in the background."""
        return self._snapshots.busy

    def wait_for_snapshot(self) -> None:
        """Wait until the snapshots being written in the background, if any, are on disk (and
        served, when nothing changed meanwhile). Not to be called holding the engine's lock."""
        self._snapshots.wait(holding_lock=False)
