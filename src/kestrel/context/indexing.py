"""The context engine's indexing side: reading files into records, applying them to the
postings (file by file, or rebuilt whole after a big read), in the caller's thread or on a
background job. `ContextEngine` is built on it; its queries live in `kestrel.context.ranking`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from kestrel.context import whole
from kestrel.context.compaction import Compacting
from kestrel.context.embed import Embedder
from kestrel.context.index_store import FileRecord, IndexStore
from kestrel.context.inventory import Entry
from kestrel.context.lexical import Vocabulary
from kestrel.context.loading import SnapshotWriter
from kestrel.context.postings import Postings
from kestrel.context.rank import PathIndex
from kestrel.context.reader import RANKED_KINDS, ReadFile, read_files
from kestrel.context.records_of import embedded, record_of
from kestrel.context.snapshot import SnapshotUnusable
from kestrel.context.turns import Job, Progress, Turns, release_freed, settle
from kestrel.context.whole import stored_part, written_whole

BULK_MIN_FILES = 500
"""A read of more files than this (and than a tenth of the index) rebuilds the postings whole."""
POOL_MIN_FILES = 1000
"""Reads of at least this many files go to worker processes; fewer are read in this thread."""
REBUILD_MIN_FILES = 2000
"""While a bulk read runs, the postings are rebuilt each time this many files (or as many as
they hold, if more) have been read, so that a first index answers with what it has so far."""
STEP_FILES = 8
"""A background read makes and applies records this many at a time, giving way between."""


class Indexing(Compacting):
    """Reading and applying files; every method here runs under (or takes) `_lock`."""

    root: Path
    workers: int
    _store: IndexStore
    _embedder: Embedder | None
    _vocab: Vocabulary
    _records: dict[str, FileRecord]
    _post: Postings
    _pending: set[str]
    _building: set[str] | None
    _applied: set[str]
    _job: Job | None
    _failed: Exception | None
    _lock: threading.RLock
    _snapshots: SnapshotWriter
    _unsaved: int
    _path_index: PathIndex
    _turns: Turns

    def _start_job(self, todo: Sequence[Entry]) -> None:
        job = self._job = Job(len(todo))
        job.thread = threading.Thread(
            target=self._run_job, args=(job, todo), name="kestrel-index", daemon=True
        )
        self._pending.update(e.path for e in todo)
        job.thread.start()

    def _run_job(self, job: Job, todo: Sequence[Entry]) -> None:
        try:
            self._read_in(todo, None, job)
        except Exception as exc:  # a disk or index error: the next refresh raises it
            with self._lock:
                self._failed = exc
        finally:
            with self._lock:
                if self._job is job:
                    self._job = None
            self._maybe_compact()

    def _update(
        self, todo: Sequence[Entry], removed: Sequence[str], progress: Progress | None
    ) -> int:
        """Drop `removed`, read `todo` and index it; returns how many files had new content."""
        with self._lock:
            self._drop_all(removed)
            self._pending.update(e.path for e in todo)
            changed = self._read_in(todo, progress, None)
            self._maybe_compact()
            return changed

    def _drop_all(self, removed: Sequence[str]) -> None:
        if not removed:
            return
        for path in removed:
            self._drop(path)
        self._store.save(vocabulary=self._vocab.terms, upserts=(), removals=removed)

    def _read_in(self, todo: Sequence[Entry], progress: Progress | None, job: Job | None) -> int:
        """Read `todo` (pending paths), index what is read, save it; returns files changed."""
        # Many changes at once (a first index, a checkout): rebuild the postings at the end
        # (and now and then on the way) rather than change them file by file.
        bulk = len(todo) > max(BULK_MIN_FILES, len(self._records) // 10)
        workers = self.workers if len(todo) >= POOL_MIN_FILES else 0
        done = changed = since_build = 0
        stop = job.stop if job is not None else None
        # A big read keeps what it read on disk as it goes (`kestrel.context.whole`).
        spill: list[FileRecord] | None = None
        if bulk and len(todo) >= whole.WHOLE_MIN_FILES and self._store.path is not None:
            spill = []
        try:
            give_way = self._turns.give_way if job is not None else None
            for batch in read_files(self.root, todo, workers, stop, give_way):
                with self._lock:
                    self._unsaved += 1
                upserts, removed, touched = self._take(batch, bulk=bulk, give_way=give_way)
                # Saved outside the lock: queries need not wait for the disk.
                if give_way is not None:
                    give_way()
                if upserts or removed:
                    self._store.save(
                        vocabulary=self._vocab.terms, upserts=upserts, removals=removed
                    )
                if touched:
                    self._store.touch(touched)
                with self._lock:
                    self._unsaved -= 1  # not on an error: no snapshot stands for the rows then
                if spill is not None:
                    spill += upserts
                    if len(spill) >= whole.PART_FILES:
                        spill = self._spilled(spill)
                changed += len(upserts)
                done += len(batch)
                since_build += len(batch)
                if job is not None:
                    job.done = done
                if progress is not None:
                    progress(done, len(todo))
                # In the background, queries meanwhile see what has been read so far.
                grown = since_build >= max(REBUILD_MIN_FILES, len(self._post.held))
                if bulk and job is not None and grown:
                    self._rebuild(serving=True, spilled=spill is not None)
                    since_build = 0
                    spill = None if spill is None else []  # served now, from a snapshot
        finally:
            # Many files replaced one by one leave dead entries behind: rebuilt here, off the
            # lock when in the background, rather than inside one update under the lock.
            if bulk or self._post.crowded():
                self._rebuild(serving=job is not None, final=True)
            with self._lock:
                # What was not read (stopped, or failed) is planned again by the next refresh.
                for entry in todo:
                    held = self._post.held.get(entry.path)
                    record = self._records.get(entry.path)
                    if record is None or held is record or record.kind not in RANKED_KINDS:
                        self._pending.discard(entry.path)
                        self._applied.discard(entry.path)
        return changed

    def _take(
        self,
        batch: Sequence[tuple[Entry, ReadFile | None]],
        *,
        bulk: bool,
        give_way: Callable[[], None] | None,
    ) -> tuple[list[FileRecord], list[str], list[tuple[str, int, int]]]:
        """Turn a batch into records and apply them; returns what to save.

        Records are made before taking the lock, so queries wait only for the indexing. In the
        background (`give_way` set) both go in steps of `STEP_FILES`, each after the queries
        running meanwhile (see `kestrel.context.turns`).
        """
        step = STEP_FILES if give_way is not None else max(len(batch), 1)
        upserts: list[FileRecord] = []
        removed: list[str] = []
        touched: list[tuple[str, int, int]] = []
        for at in range(0, len(batch), step):
            part = batch[at : at + step]
            if give_way is not None:
                give_way()
            records = [
                None if read is None else record_of(read, rows, self._vocab)
                for (_, read), rows in zip(part, embedded(self._embedder, part), strict=True)
            ]
            if give_way is not None:
                give_way()
            with self._lock:
                done = self._apply(part, records, bulk=bulk)
            upserts += done[0]
            removed += done[1]
            touched += done[2]
        if bulk:
            return upserts, removed, touched
        # A little per batch, not all on the next query; in the background, the segments are
        # merged off the lock (one merge took 190 ms at 250,000 files, and queries waited).
        if give_way is None:
            with self._lock:
                self._post.prepare()
            return upserts, removed, touched
        give_way()
        with self._lock:
            build = self._post.tails_ahead()
        install = build()
        with self._lock:
            install()
        return upserts, removed, touched

    def _apply(
        self,
        batch: Sequence[tuple[Entry, ReadFile | None]],
        records: Sequence[FileRecord | None],
        *,
        bulk: bool,
    ) -> tuple[list[FileRecord], list[str], list[tuple[str, int, int]]]:
        """Index one batch of read files (under the lock); returns what to save.

        That is the records with new content, the paths gone and the new stats of files whose
        content did not change.
        """
        upserts: list[FileRecord] = []
        touched: list[tuple[str, int, int]] = []
        removed: list[str] = []
        for (entry, _), record in zip(batch, records, strict=True):
            if entry.path not in self._pending:
                continue  # re-read meanwhile by a smaller refresh, which is newer
            if record is None:
                self._drop(entry.path)
                removed.append(entry.path)
                continue
            old = self._records.get(entry.path)
            if (
                old is not None
                and old.content_hash == record.content_hash
                and not self._lacks_vectors(old)
            ):
                restat = old.restat(entry.size, entry.mtime_ns)
                touched.append((entry.path, entry.size, entry.mtime_ns))
                if entry.path in self._applied:
                    # Read by a bulk read whose rebuild is to come: it waits with the rest.
                    self._set_record(restat)
                    continue
                if self._post.held.get(entry.path) is old:
                    self._post.held[entry.path] = restat
                self._records[entry.path] = restat
                self._pending.discard(entry.path)
                continue
            if bulk and record.kind in RANKED_KINDS:
                self._set_record(record)
            else:
                self._put(record)
                self._pending.discard(record.path)
            upserts.append(record)
        return upserts, removed, touched

    def _rebuild(self, *, serving: bool, final: bool = False, spilled: bool = False) -> None:
        """Build the postings afresh from the records.

        `serving`: off the lock, while queries use the old postings, then swapped in; changes
        made while building are noted in `_building` and redone on the new postings. Otherwise
        the old postings are let go first, so the two are never held at once.
        """
        with self._lock:
            if not serving and self._building is None:
                self._post = Postings()
                if final and self._serve_whole(serving=False):
                    return
                fresh = Postings.built(self._ranked(), self._has_vectors)
                if final:
                    saved = self._unsaved == 0
                    self._snapshots.schedule(self._vocab, self._records, fresh, saved=saved)
                self._swap(fresh, set())
                settle()
                return
            ranked = self._ranked()
            if self._building is not None:
                # Another thread is building: build here, under the lock. Its swap comes
                # later and redoes every change made since its snapshot, ours included.
                self._swap(Postings.built(ranked, self._has_vectors), set())
                return
            self._building = set()
        try:
            # A read that keeps its records on disk serves what it read from a snapshot.
            if (final or spilled) and self._serve_whole(serving=True, any_size=spilled):
                return
            fresh = Postings.built(ranked, self._has_vectors)
        except BaseException:
            with self._lock:
                self._building = None
            raise
        with self._lock:
            changed, self._building = self._building, None
            if final:
                # Before the changes made meanwhile are redone on `fresh`, and in the same
                # hold of the lock as its swap: the writer's `_lighten` then finds it served.
                saved = self._unsaved == 0 and not changed
                self._snapshots.schedule(self._vocab, dict(self._records), fresh, saved=saved)
            self._swap(fresh, changed)
        settle()

    def _spilled(self, records: list[FileRecord]) -> list[FileRecord] | None:
        """Swap saved records for the same ones kept in a part snapshot; None when the part
        could not be written (the rest of the read keeps its records in memory)."""
        try:
            stored = stored_part(self._store, records)
        except (SnapshotUnusable, OSError, ValueError):
            return None
        with self._lock:
            for record in records:
                if self._records.get(record.path) is record:
                    self._records[record.path] = stored[record.path]
        return []

    def _serve_whole(self, *, serving: bool, any_size: bool = False) -> bool:
        """Serve a big index read whole (all saved) from a snapshot written of it at once
        (`kestrel.context.whole`), off the lock when `serving`; False when it is small (unless
        `any_size`) or unsaved, the write failed, or files changed meanwhile (`_building`)."""
        with self._lock:
            small = len(self._records) < whole.WHOLE_MIN_FILES and not any_size
            if small or self._unsaved:
                return False
            records = dict(self._records) if serving else self._records
            point = self._store.snapshot_point()  # with the records: saves hold the lock
            self._snapshots.wait()
        loaded = written_whole(self._store, self._vocab, records, self._has_vectors, point)
        with self._lock:
            if loaded is None or self._building:
                return False
            self._building = None
            self._serve_loaded(loaded)
            self._pending -= self._applied  # every record read is served now
            self._applied.clear()
        del records
        release_freed()  # the decoded records, now that nothing holds them
        settle()
        return True

    def _swap(self, fresh: Postings, changed: set[str]) -> None:
        """Serve `fresh`, after redoing on it the paths changed since its snapshot."""
        with self._lock:
            self._post = fresh
            for path in changed:
                record = self._records.get(path)
                if record is not None and record.kind in RANKED_KINDS:
                    fresh.add(record, self._has_vectors)
                else:
                    fresh.remove(path)
            # Pending paths whose new content the postings now hold are served again.
            served = {p for p in self._applied if fresh.held.get(p) is self._records.get(p)}
            self._applied -= served
            self._pending -= served

    def _ranked(self) -> list[FileRecord]:
        return [r for r in self._records.values() if r.kind in RANKED_KINDS]

    def _has_vectors(self, record: FileRecord) -> bool:
        return record.vector_shape is not None and not self._lacks_vectors(record)

    def _lacks_vectors(self, record: FileRecord) -> bool:
        """Whether a ranked file still needs embedding by the current embedder."""
        if self._embedder is None or record.kind not in RANKED_KINDS:
            return False
        shape = record.vector_shape
        return shape is None or shape != (record.chunk_count + 1, self._embedder.dim)

    def _set_record(self, record: FileRecord) -> None:
        """Record new content whose postings wait for the next rebuild (the path stays pending)."""
        self._track_path(record)
        self._records[record.path] = record
        self._applied.add(record.path)
        self._changed_since_written.add(record.path)
        if self._building is not None:
            self._building.add(record.path)

    def _track_path(self, record: FileRecord) -> None:
        """Keep the path lookups up to date: rebuilding them cost 300 ms at 31k files."""
        if record.path not in self._records:
            self._path_index.add(record.path)

    def _put(self, record: FileRecord) -> None:
        self._track_path(record)
        self._records[record.path] = record
        self._applied.discard(record.path)
        self._changed_since_written.add(record.path)
        if self._building is not None:
            self._building.add(record.path)
        if record.kind in RANKED_KINDS:
            self._post.add(record, self._has_vectors)
        else:
            self._post.remove(record.path)

    def _drop(self, path: str) -> None:
        self._pending.discard(path)
        self._applied.discard(path)
        if self._records.pop(path, None) is None:
            return
        self._changed_since_written.add(path)
        self._path_index.remove(path)
        if self._building is not None:
            self._building.add(path)
        self._post.remove(path)
