"""The context engine: an index of one repository, kept fresh, answering ranked queries."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from kestrel.context import ranking
from kestrel.context.embed import Embedder
from kestrel.context.history import History, head_of, read_history
from kestrel.context.index_store import FileRecord, IndexStore, default_cache_dir, index_path_for
from kestrel.context.indexing import Indexing
from kestrel.context.inventory import Entry, classify, list_files
from kestrel.context.learned import LearnedRanker
from kestrel.context.loading import (
    SnapshotWriter,
    load_index,
    opening_notice,
    restored,
)
from kestrel.context.model import FileHit, IndexReport, SearchResult, Symbol, SymbolHit
from kestrel.context.postings import Postings
from kestrel.context.query import TaskQuery, parse_query
from kestrel.context.rank import PathIndex, Weights
from kestrel.context.reader import RANKED_KINDS, index_workers
from kestrel.context.record import KindsOf
from kestrel.context.snapshot import SnapshotUnusable
from kestrel.context.turns import Job, Progress, Turns, collector_paused, settle
from kestrel.context.watch import ChangeWatcher

__all__ = ["RANKED_KINDS", "ContextEngine", "Progress"]

BACKGROUND_MIN_FILES = 100
"""A refresh that need not wait reads at least this many files in the background."""
LIGHTEN_MIN_FILES = 20_000
"""An index this big built whole serves from the snapshot written after (`_lighten`)."""


class ContextEngine(Indexing):
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
        self._job: Job | None = None
        self._failed: Exception | None = None
        self._lock = threading.RLock()
        self._turns = Turns()
        self.stale_caught = 0
        self._watcher: ChangeWatcher | None = None
        self._snapshots = SnapshotWriter(store, self._lighten)
        self.lightened = False
        """Whether the records and postings read before were swapped for the snapshot's."""
        # Hundreds of thousands of records are made at once and all live on: collection
        # passes over them while they are made would only find nothing to free.
        with collector_paused():
            loaded = load_index(store, self._has_vectors)
        self._vocab = loaded.vocab
        self._records: dict[str, FileRecord] = loaded.records
        self._post = loaded.post
        self.opened_from_snapshot = loaded.from_snapshot
        """Whether the postings came from the snapshot (else every record was decoded)."""
        self.notice = opening_notice(store, loaded.note)
        """Why the index or its snapshot had to be rebuilt on opening ("" when it did not)."""
        self._unsaved = 0
        """Batches applied to the records and not yet saved to the index (or failed to)."""
        self._changed_since_written = set(loaded.changed)
        self._compaction_stop = threading.Event()
        if not loaded.from_snapshot:
            # Decoded from the index's rows just now: the snapshot stands for them.
            self._snapshots.schedule(self._vocab, self._records, self._post, saved=True)
        # Kept up to date: built on a first query, they cost it 0.4 s at 31k files. A big
        # index's path lookups are built on a thread, so that opening returns sooner.
        self._path_index = PathIndex(list(self._records), background=True)
        self._kinds = KindsOf(self._records)
        if not loaded.from_snapshot:
            gc.collect()  # what decoding left behind, before the rest is settled
        settle()

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
        self._compaction_stop.set()  # a snapshot written to spare the next open some rows
        job = self._job
        if job is not None:
            job.stop.set()
            job.join(None)
        with self._lock:
            if self._watcher is not None:
                self._watcher.stop()
            self._snapshots.wait()
            self._store.close()

    def _lighten(
        self, path: Path, nonce: str, post: Postings, held: list[FileRecord], terms: int
    ) -> bool:
        """Serve a big index from the snapshot just written (on the writer's thread), when it
        holds exactly what is served: the records' bodies are then read back on demand instead
        of held, as after a reopen (at 250,481 files, under 1 GB instead of 5)."""
        if len(held) < LIGHTEN_MIN_FILES:  # `post` is checked under the lock its swap held
            return False
        try:
            loaded = restored(path, nonce, self._has_vectors)
        except (SnapshotUnusable, OSError, ValueError):
            return False  # the records in memory serve on
        while not self._lock.acquire(timeout=0.05):
            if self._snapshots.joining.is_set():
                return False  # whoever holds the lock is waiting for this thread
        try:
            unchanged = self._post is post and post.exports() is not None
            unchanged = unchanged and not self._pending and self._building is None
            unchanged = unchanged and len(self._vocab) == terms
            unchanged = unchanged and len(self._records) == len(held) == len(loaded.records)
            if not unchanged or any(self._records.get(r.path) is not r for r in held):
                return False
            self._serve_loaded(loaded)
        finally:
            self._lock.release()
        settle()
        return True

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
        with self._turns.query(), self._lock:  # a background read gives way meanwhile
            self.catch_up()
            query = parse_query(text)
            for _ in range(3):
                with collector_paused():
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
