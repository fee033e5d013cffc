"""The context engine: an index of one repository, kept fresh, answering ranked queries."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from kestrel.context import ranking
from kestrel.context.embed import Embedder
from kestrel.context.history import History, head_of, read_history
from kestrel.context.index_store import FileRecord, IndexStore, default_cache_dir, index_path_for
from kestrel.context.inventory import Entry, classify, list_files
from kestrel.context.learned import LearnedRanker
from kestrel.context.loading import SnapshotWriter, load_index
from kestrel.context.model import FileHit, IndexReport, SearchResult, Symbol, SymbolHit
from kestrel.context.postings import Postings
from kestrel.context.query import TaskQuery, parse_query
from kestrel.context.rank import (
    PathIndex,
    Weights,
)
from kestrel.context.reader import RANKED_KINDS, ReadFile, index_workers, read_files
from kestrel.context.record import KindsOf
from kestrel.context.watch import ChangeWatcher

__all__ = ["RANKED_KINDS", "ContextEngine", "Progress"]

Progress = Callable[[int, int], None]
"""Called as (files done, files to do) while indexing."""

BULK_MIN_FILES = 500
"""A read of more files than this (and than a tenth of the index) rebuilds the postings whole."""
POOL_MIN_FILES = 1000
"""Reads of at least this many files go to worker processes; fewer are read in this thread."""
BACKGROUND_MIN_FILES = 100
"""A refresh that need not wait reads at least this many files in the background."""
REBUILD_MIN_FILES = 2000
"""While a bulk read runs, the postings are rebuilt each time this many files (or as many as
they hold, if more) have been read, so that a first index answers with what it has so far."""


class _Job:
    """A refresh reading files on a background thread."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def join(self, progress: Progress | None) -> None:
        thread = self.thread
        while thread is not None and thread.is_alive():
            if progress is not None:
                progress(self.done, self.total)
            thread.join(0.2)


class ContextEngine:
    """Index, freshness and search for the files under `root`.

    Every public method may be called from any thread; one lock orders them. A big refresh that
    need not wait (`refresh(wait=False)`) reads files on a background thread and in worker
    processes; meanwhile queries leave out the files not yet read, and say how many there are.
    """

    def __init__(
        self,
        root: Path,
        store: IndexStore,
        *,
        weights: Weights | None = None,
        embedder: Embedder | None = None,
        workers: int | None = None,
        ranker: LearnedRanker | None = None,
        definition_ranker: LearnedRanker | None = None,
    ) -> None:
        self.root = root
        self.weights = weights or Weights()
        self.ranker = ranker
        """Reorders the best hand-fused files when set (`kestrel.context.learned`)."""
        self.definition_ranker = definition_ranker
        """Reorders the best hand-scored definitions when set."""
        self.history: History | None = None
        """The git history of the files, read on refresh when a ranker wants it."""
        self.workers = index_workers() if workers is None else workers
        """Worker processes for big reads; 0 reads every file in the engine's own thread."""
        self._store = store
        self._embedder = embedder
        self._pending: set[str] = set()
        """Paths being read: their postings are old or missing, so queries leave them out."""
        self._building: set[str] | None = None
        """While postings are rebuilt off the lock: the paths changed meanwhile, to redo after."""
        self._applied: set[str] = set()
        """Pending paths whose new record is read, waiting for the postings to be rebuilt."""
        self._job: _Job | None = None
        self._failed: Exception | None = None
        self._lock = threading.RLock()
        self.stale_caught = 0
        self._watcher: ChangeWatcher | None = None
        self._snapshots = SnapshotWriter(store)
        # Hundreds of thousands of records are made at once and all live on: collection
        # passes over them while they are made would only find nothing to free.
        with _collector_paused():
            loaded = load_index(store, self._has_vectors)
        self._vocab = loaded.vocab
        self._records: dict[str, FileRecord] = loaded.records
        self._post = loaded.post
        self.opened_from_snapshot = loaded.from_snapshot
        """Whether the postings came from the snapshot (else every record was decoded)."""
        self.notice = _notice(store, loaded.note)
        """Why the index or its snapshot had to be rebuilt on opening ("" when it did not)."""
        self._unsaved = 0
        """Batches applied to the records and not yet saved to the index (or failed to)."""
        if not loaded.from_snapshot:
            # Decoded from the index's rows just now: the snapshot stands for them.
            self._snapshots.schedule(self._vocab, self._records, self._post, saved=True)
        # Kept up to date: built on a first query, they cost it 0.4 s at 31k files. A big
        # index's path lookups are built on a thread, so that opening returns sooner.
        self._path_index = PathIndex(list(self._records), background=True)
        self._kinds = KindsOf(self._records)
        if not loaded.from_snapshot:
            gc.collect()  # what decoding left behind, before the rest is settled
        _settle()

    @classmethod
    def open(
        cls,
        root: Path,
        cache_dir: Path | None = None,
        *,
        persist: bool = True,
        embedder: Embedder | None = None,
        workers: int | None = None,
        ranker: LearnedRanker | None = None,
        definition_ranker: LearnedRanker | None = None,
    ) -> ContextEngine:
        """The engine for `root`, its index kept under `cache_dir` (or in memory).

        With an `embedder`, chunks are embedded as they are indexed and ranked by meaning too;
        an index embedded by another model is embedded again on the next refresh.
        """
        root = root.resolve()
        path = index_path_for(root, cache_dir or default_cache_dir()) if persist else None
        name = None if embedder is None else embedder.name
        store = IndexStore(path, embedder=name)
        return cls(
            root,
            store,
            embedder=embedder,
            workers=workers,
            ranker=ranker,
            definition_ranker=definition_ranker,
        )

    def close(self) -> None:
        """Stop any background read, stop watching and close the index file."""
        job = self._job
        if job is not None:
            job.stop.set()
            job.join(None)
        with self._lock:
            if self._watcher is not None:
                self._watcher.stop()
            self._snapshots.wait()
            self._store.close()

    def watch(self) -> bool:
        """Follow changes as they happen, so queries in a long session apply only what changed."""
        with self._lock:
            if self._watcher is None:
                self._watcher = ChangeWatcher(self.root)
                if not self._watcher.start():
                    self._watcher = None
                    return False
            return True

    def catch_up(self) -> int:
        """Apply what the watcher saw; new files and directories mean a rescan (ignore rules).

        A big change is read in the background, as `refresh(wait=False)` does.
        """
        with self._lock:
            if self._watcher is None:
                return 0
            changed = self._watcher.drain()
            if changed is not None and not changed:
                return 0
            if changed is None or any(self._needs_rescan(p) for p in changed):
                report = self.refresh(wait=False)
                return report.added + report.changed + report.removed
            return self.refresh_paths(changed)

    def _needs_rescan(self, path: str) -> bool:
        if path not in self._records:
            return (self.root / path).exists() or any(
                p.startswith(path + "/") for p in self._records
            )
        return False

    @property
    def pending(self) -> int:
        """Files being read in the background, left out of queries until they are indexed."""
        return len(self._pending)

    # ----------------------------------------------------------------- indexing

    def refresh(self, progress: Progress | None = None, *, wait: bool = True) -> IndexReport:
        """Bring the index up to date with the files on disk; only changed files are read.

        With `wait=False`, a change of many files (a first index, a checkout) is read in the
        background and the call returns at once: its report counts those files as `pending`.
        A refresh that waits first waits for a background read still running.
        """
        started = time.perf_counter()
        if self.ranker is not None:
            self._read_history()
        job = self._job
        if job is not None:
            if not wait:
                return self._report(started, pending=len(self._pending))
            job.join(progress)
        with self._lock:
            failed, self._failed = self._failed, None
            if failed is not None:
                # What the failed read did not index is planned again by the next refresh.
                raise failed
            entries = list_files(self.root)
            listed = {e.path: e for e in entries}
            removed = [p for p in self._records if p not in listed]
            todo = [
                e
                for e in entries
                if (r := self._records.get(e.path)) is None
                or (r.size, r.mtime_ns) != (e.size, e.mtime_ns)
                or self._lacks_vectors(r)
            ]
            added = sum(1 for e in todo if e.path not in self._records)
            if wait or len(todo) < BACKGROUND_MIN_FILES:
                changed = self._update(todo, removed, progress)
                return self._report(started, added, changed - added, len(removed))
            self._drop_all(removed)
            self._start_job(todo)
            return self._report(started, added, 0, len(removed), pending=len(self._pending))

    def _read_history(self) -> None:
        """Read the history again when HEAD moved (one `git rev-parse` when it did not)."""
        head = head_of(self.root)
        if head is None:
            self.history = None
        elif self.history is None or self.history.head != head:
            self.history = read_history(self.root, head)

    def refresh_paths(self, paths: Iterable[str]) -> int:
        """Re-check named files (after an edit, or a watcher event); returns how many changed."""
        with self._lock:
            todo: list[Entry] = []
            removed: list[str] = []
            for path in set(paths):
                try:
                    st = (self.root / path).lstat()
                except OSError:
                    if path in self._records:
                        removed.append(path)
                    continue
                record = self._records.get(path)
                if record is None or (record.size, record.mtime_ns) != (
                    st.st_size,
                    st.st_mtime_ns,
                ):
                    todo.append(Entry(path, st.st_size, st.st_mtime_ns))
            return self._update(todo, removed, None) + len(removed)

    def _report(
        self, started: float, added: int = 0, changed: int = 0, removed: int = 0, pending: int = 0
    ) -> IndexReport:
        with self._lock:
            skipped: dict[str, int] = {}
            for record in self._records.values():
                if record.kind not in RANKED_KINDS:
                    skipped[record.kind] = skipped.get(record.kind, 0) + 1
            return IndexReport(
                files_total=len(self._records),
                files_ranked=len(self._post.files),
                added=added,
                changed=changed,
                removed=removed,
                took_s=time.perf_counter() - started,
                skipped=skipped,
                pending=pending,
            )

    def _start_job(self, todo: Sequence[Entry]) -> None:
        job = self._job = _Job(len(todo))
        job.thread = threading.Thread(
            target=self._run_job, args=(job, todo), name="kestrel-index", daemon=True
        )
        self._pending.update(e.path for e in todo)
        job.thread.start()

    def _run_job(self, job: _Job, todo: Sequence[Entry]) -> None:
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

    def _read_in(self, todo: Sequence[Entry], progress: Progress | None, job: _Job | None) -> int:
        """Read `todo` (pending paths), index what is read, save it; returns files changed."""
        # Many changes at once (a first index, a checkout): rebuild the postings at the end
        # (and now and then on the way) rather than change them file by file.
        bulk = len(todo) > max(BULK_MIN_FILES, len(self._records) // 10)
        workers = self.workers if len(todo) >= POOL_MIN_FILES else 0
        done = changed = since_build = 0
        stop = job.stop if job is not None else None
        try:
            for batch in read_files(self.root, todo, workers, stop):
                # Turned into records before taking the lock: queries wait only for the indexing.
                records = [
                    None if read is None else self._record_of(read, rows)
                    for (_, read), rows in zip(batch, self._embed(batch), strict=True)
                ]
                with self._lock:
                    upserts, removed, touched = self._apply(batch, records, bulk=bulk)
                    if not bulk:
                        self._post.prepare()  # a little per batch, not all on the next query
                    self._unsaved += 1
                # Saved outside the lock: queries need not wait for the disk.
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
                _settle()
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
            if final:
                with self._lock:
                    saved = self._unsaved == 0 and not self._building
                    records = dict(self._records)
                    self._snapshots.schedule(self._vocab, records, fresh, saved=saved)
        except BaseException:
            with self._lock:
                self._building = None
            raise
        with self._lock:
            changed, self._building = self._building, None
            self._swap(fresh, changed)
        _settle()

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

    # ----------------------------------------------------------------- queries

    @property
    def paths(self) -> list[str]:
        """Every indexed path."""
        with self._lock:
            return list(self._records)

    def record(self, path: str) -> FileRecord | None:
        """What the index holds for one path."""
        with self._lock:
            return self._records.get(path)

    def definitions_named(self, name: str) -> list[tuple[str, Symbol]]:
        """Definitions whose short name is exactly `name`."""
        with self._lock:
            by_path = self._post.names.get(name)
            return [(path, symbol) for path, symbols in by_path.items() for symbol in symbols]

    def definition_count(self, name: str) -> int:
        """About how many definitions are named `name`, without reading them."""
        with self._lock:
            return self._post.names.count(name)

    def search(self, text: str, k: int = 10, *, symbols_per_file: int = 3) -> SearchResult:
        """Files and definitions ranked for a task or a query, freshness checked before serving."""
        started = time.perf_counter()
        with self._lock:
            self.catch_up()
            query = parse_query(text)
            for _ in range(3):
                with _collector_paused():
                    files, symbols = self._rank(query, k, symbols_per_file)
                stale = [
                    hit.path for hit in files if not self._is_fresh(hit.path, hit.content_hash)
                ]
                if not stale:
                    break
                # A file changed under us: re-read it and rank again, never serve the old text.
                self.stale_caught += len(stale)
                self.refresh_paths(stale)
            took = (time.perf_counter() - started) * 1000
            return SearchResult(
                query=text,
                files=files,
                symbols=symbols,
                took_ms=took,
                stale_caught=self.stale_caught,
                pending=len(self._pending),
            )

    def _rank(
        self, query: TaskQuery, k: int, per_file: int
    ) -> tuple[tuple[FileHit, ...], tuple[SymbolHit, ...]]:
        return ranking.rank(self, query, k, per_file)

    def file_features(self, text: str) -> tuple[list[str], np.ndarray]:
        """The candidate files the learned ranker would reorder and their feature rows."""
        return ranking.file_features(self, text)

    def definition_features(self, text: str) -> tuple[list[str], np.ndarray]:
        """The best 100 hand-scored definitions (`path::qualname`) and their feature rows."""
        return ranking.definition_features(self, text)

    def _named_symbol(self, path: str, qualname: str) -> Symbol | None:
        record = self._post.held.get(path)
        return None if record is None else record.definition_named(qualname)

    def _symbol(self, path: str, index: int) -> Symbol | None:
        record = self._post.held.get(path)
        return None if record is None else record.definition(index)

    def _is_fresh(self, path: str, digest: str) -> bool:
        record = self._records.get(path)
        try:
            st = (self.root / path).lstat()
        except OSError:
            return False
        if record is not None and (record.size, record.mtime_ns) == (st.st_size, st.st_mtime_ns):
            return True
        try:
            return classify(path, (self.root / path).read_bytes()).content_hash == digest
        except OSError:
            return False


def _notice(store: IndexStore, note: str) -> str:
    if store.outdated is not None:
        return f"the index was in format {store.outdated}, not the current one: it is rebuilt"
    if store.migrated is not None:
        return f"the index was in format {store.migrated}: brought up to the current one"
    return f"the postings snapshot was not used ({note}): rebuilt from the index" if note else ""


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection passes meanwhile: a query makes tens of thousands of short-lived
    objects (80 young-generation passes per query at 250,000 files, and now and then a full
    one), and reference counting frees them all; cycles wait for the next pass after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _settle() -> None:
    """Leave what exists now out of the garbage collector's full passes.

    A big index is hundreds of thousands of long-lived objects (definitions, records); a full
    pass over them took 200-250 ms on a 31,566-file tree and fell on whichever query was running,
    most often while a background read was creating objects. They live as long as the engine,
    so the collector need not walk them again (`gc.freeze`). Objects that are dropped are still
    freed by reference counting; only reference cycles among them would wait.
    """
    gc.freeze()
