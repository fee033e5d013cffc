"""The context engine's indexing side: reading files into records, applying them to the
postings (file by file, or rebuilt whole after a big read), in the caller's thread or on a
background job. `ContextEngine` is built on it; its queries live in `kestrel.context.ranking`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kestrel.context.embed import Embedder
from kestrel.context.index_store import FileRecord, IndexStore
from kestrel.context.inventory import Entry
from kestrel.context.lexical import Vocabulary
from kestrel.context.loading import SnapshotWriter
from kestrel.context.postings import Postings
from kestrel.context.rank import PathIndex
from kestrel.context.reader import RANKED_KINDS, ReadFile, read_files
from kestrel.context.turns import Job, Progress, Turns, settle

BULK_MIN_FILES = 500
"""A read of more files than this (and than a tenth of the index) rebuilds the postings whole."""
POOL_MIN_FILES = 1000
"""Reads of at least this many files go to worker processes; fewer are read in this thread."""
REBUILD_MIN_FILES = 2000
"""While a bulk read runs, the postings are rebuilt each time this many files (or as many as
they hold, if more) have been read, so that a first index answers with what it has so far."""
STEP_FILES = 8
"""A background read makes and applies records this many at a time, giving way between."""


class Indexing:
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

    def _update(
        self, todo: Sequence[Entry], removed: Sequence[str], progress: Progress | None
    ) -> int:
        """Drop `removed`, read `todo` and index it; returns how many files had new content."""
        with self._lock:
            self._drop_all(removed)
            self._pending.update(e.path for e in todo)
            return self._read_in(todo, progress, None)

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
                    self._rebuild(serving=True)
                    since_build = 0
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
                None if read is None else self._record_of(read, rows)
                for (_, read), rows in zip(part, self._embed(part), strict=True)
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

    def _embed(self, batch: Sequence[tuple[Entry, ReadFile | None]]) -> list[np.ndarray | None]:
        """Each read file's chunk vectors (one call for the whole batch); None without them."""
        texts_of = [
            read.analysis.texts if read is not None and read.analysis is not None else ()
            for _, read in batch
        ]
        texts = [text for file_texts in texts_of for text in file_texts]
        if self._embedder is None or not texts:
            return [None] * len(batch)
        matrix = self._embedder.embed(texts).astype(np.float16)
        out: list[np.ndarray | None] = []
        at = 0
        for file_texts in texts_of:
            out.append(matrix[at : at + len(file_texts)] if file_texts else None)
            at += len(file_texts)
        return out

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

    def _record_of(self, read: ReadFile, vectors: np.ndarray | None) -> FileRecord:
        entry, analysis = read.entry, read.analysis
        if analysis is None:
            empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
            return FileRecord(
                entry.path,
                entry.size,
                entry.mtime_ns,
                read.content_hash,
                read.kind,
                None,
                empty,
                (),
            )
        return FileRecord(
            path=entry.path,
            size=entry.size,
            mtime_ns=entry.mtime_ns,
            content_hash=read.content_hash,
            kind=read.kind,
            symbols=analysis.symbols,
            terms=self._vocab.vector(analysis.terms),
            chunks=tuple(self._vocab.vector(c) for c in analysis.chunks),
            vectors=vectors,
        )

    def _rebuild(self, *, serving: bool, final: bool = False) -> None:
        """Build the postings afresh from the records.

        `serving`: off the lock, while queries use the old postings, then swapped in; changes
        made while building are noted in `_building` and redone on the new postings. Otherwise
        the old postings are let go first, so the two are never held at once.
        """
        with self._lock:
            if not serving and self._building is None:
                self._post = Postings()
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
        self._path_index.remove(path)
        if self._building is not None:
            self._building.add(path)
        self._post.remove(path)
