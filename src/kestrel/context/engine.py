"""The context engine: an index of one repository, kept fresh, answering ranked queries."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from kestrel.context.analysis import analyze
from kestrel.context.embed import Embedder
from kestrel.context.index_store import FileRecord, IndexStore, default_cache_dir, index_path_for
from kestrel.context.inventory import MAX_RANKED_BYTES, Entry, classify, hash_file, list_files
from kestrel.context.lexical import Bm25Index, ScoreArray, Vocabulary
from kestrel.context.model import FileHit, IndexReport, SearchResult, Symbol, SymbolHit
from kestrel.context.query import TaskQuery, parse_query
from kestrel.context.rank import (
    PathIndex,
    Signals,
    Weights,
    fuse,
    identifier_scores,
    mention_scores,
    normalised,
)
from kestrel.context.semantic import VectorIndex, spread
from kestrel.context.watch import ChangeWatcher

Progress = Callable[[int, int], None]
"""Called as (files done, files to do) while indexing."""

RANKED_KINDS = frozenset({"code", "text"})
_CHUNK_SEP = "\0"
_CHUNK_POOL = 3000
_SEMANTIC_FILES = 200
_SEMANTIC_ROWS = 200
EMBED_BATCH = 4096
"""Texts embedded in one call while indexing: large enough to batch, small enough to hold."""


class ContextEngine:
    """Index, freshness and search for the files under `root`."""

    def __init__(
        self,
        root: Path,
        store: IndexStore,
        *,
        weights: Weights | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.root = root
        self.weights = weights or Weights()
        self._store = store
        self._embedder = embedder
        self._vectors = VectorIndex()
        self._vocab = Vocabulary(store.vocabulary())
        self._records: dict[str, FileRecord] = {}
        self._files = Bm25Index(k1=1.2, b=0.75)
        # Definitions vary less in length than files; normalising less keeps long ones findable.
        self._chunks = Bm25Index(k1=1.2, b=0.5)
        self._by_name: dict[str, dict[str, list[Symbol]]] = {}
        """Definitions by short name, then by path: dropping a file touches only its names."""
        self.stale_caught = 0
        self._path_index: PathIndex | None = None
        self._kinds: dict[str, str] | None = None
        self._watcher: ChangeWatcher | None = None
        self._load(store.records())

    @classmethod
    def open(
        cls,
        root: Path,
        cache_dir: Path | None = None,
        *,
        persist: bool = True,
        embedder: Embedder | None = None,
    ) -> ContextEngine:
        """The engine for `root`, its index kept under `cache_dir` (or in memory).

        With an `embedder`, chunks are embedded as they are indexed and ranked by meaning too;
        an index embedded by another model is embedded again on the next refresh.
        """
        root = root.resolve()
        path = index_path_for(root, cache_dir or default_cache_dir()) if persist else None
        name = None if embedder is None else embedder.name
        return cls(root, IndexStore(path, embedder=name), embedder=embedder)

    def close(self) -> None:
        """Stop watching and close the index file."""
        if self._watcher is not None:
            self._watcher.stop()
        self._store.close()

    def watch(self) -> bool:
        """Follow changes as they happen, so queries in a long session apply only what changed."""
        if self._watcher is None:
            self._watcher = ChangeWatcher(self.root)
            if not self._watcher.start():
                self._watcher = None
                return False
        return True

    def catch_up(self) -> int:
        """Apply what the watcher saw; new files and directories mean a rescan (ignore rules)."""
        if self._watcher is None:
            return 0
        changed = self._watcher.drain()
        if changed is not None and not changed:
            return 0
        if changed is None or any(self._needs_rescan(p) for p in changed):
            report = self.refresh()
            return report.added + report.changed + report.removed
        return self.refresh_paths(changed)

    def _needs_rescan(self, path: str) -> bool:
        if path not in self._records:
            return (self.root / path).exists() or any(
                p.startswith(path + "/") for p in self._records
            )
        return False

    # ----------------------------------------------------------------- indexing

    def _load(self, records: Iterable[FileRecord]) -> None:
        for record in records:
            self._records[record.path] = record
        self._rebuild()

    def _rebuild(self) -> None:
        """Build the postings afresh from the records: after loading, and after bulk changes."""
        self._path_index = self._kinds = None
        self._by_name = {}
        ranked = [r for r in self._records.values() if r.kind in RANKED_KINDS]
        self._files.bulk_load((r.path, *r.terms) for r in ranked)
        self._chunks.bulk_load(
            (f"{r.path}{_CHUNK_SEP}{i}", *chunk) for r in ranked for i, chunk in enumerate(r.chunks)
        )
        self._vectors.bulk_load(
            (r.path, r.vectors)
            for r in ranked
            if r.vectors is not None and not self._lacks_vectors(r)
        )
        for record in ranked:
            self._add_names(record)

    def refresh(self, progress: Progress | None = None) -> IndexReport:
        """Bring the index up to date with the files on disk; only changed files are read."""
        started = time.perf_counter()
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
        changed = self._update(todo, removed, progress)
        skipped: dict[str, int] = {}
        for record in self._records.values():
            if record.kind not in RANKED_KINDS:
                skipped[record.kind] = skipped.get(record.kind, 0) + 1
        return IndexReport(
            files_total=len(self._records),
            files_ranked=len(self._files),
            added=added,
            changed=changed - added,
            removed=len(removed),
            took_s=time.perf_counter() - started,
            skipped=skipped,
        )

    def refresh_paths(self, paths: Iterable[str]) -> int:
        """Re-check named files (after an edit, or a watcher event); returns how many changed."""
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
            if record is None or (record.size, record.mtime_ns) != (st.st_size, st.st_mtime_ns):
                todo.append(Entry(path, st.st_size, st.st_mtime_ns))
        return self._update(todo, removed, None) + len(removed)

    def _update(
        self, todo: Sequence[Entry], removed: Sequence[str], progress: Progress | None
    ) -> int:
        upserts: list[FileRecord] = []
        touched: list[tuple[str, int, int]] = []
        # Many changes at once (a first index, a checkout): rebuild the postings once at the end.
        bulk = len(todo) + len(removed) > max(500, len(self._records) // 10)
        pending: list[tuple[FileRecord, tuple[str, ...]]] = []
        pending_texts = 0

        def flush() -> None:
            for record in self._embedded(pending):
                if bulk:
                    self._records[record.path] = record
                else:
                    self._put(record)
                upserts.append(record)
            pending.clear()

        for n, entry in enumerate(todo):
            if progress is not None and (n % 200 == 0 or n == len(todo) - 1):
                progress(n + 1, len(todo))
            read = self._read(entry)
            if read is None:
                removed = [*removed, entry.path]
                continue
            record, texts = read
            old = self._records.get(entry.path)
            if (
                old is not None
                and old.content_hash == record.content_hash
                and not self._lacks_vectors(old)
            ):
                self._records[entry.path] = _restat(old, entry)
                touched.append((entry.path, entry.size, entry.mtime_ns))
                continue
            pending.append((record, texts))
            pending_texts += len(texts)
            if pending_texts >= EMBED_BATCH:
                flush()
                pending_texts = 0
        flush()
        for path in removed:
            if bulk:
                self._records.pop(path, None)
            else:
                self._drop(path)
        if bulk:
            self._rebuild()
        if upserts or removed:
            self._store.save(vocabulary=self._vocab.terms, upserts=upserts, removals=removed)
        if touched:
            self._store.touch(touched)
        return len(upserts)

    def _read(self, entry: Entry) -> tuple[FileRecord, tuple[str, ...]] | None:
        """The file's record (without vectors) and the texts to embed for it."""
        empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
        try:
            if entry.size > MAX_RANKED_BYTES:
                # Never hold a huge file in memory: hash it in pieces and list it unranked.
                digest = hash_file(self.root / entry.path)
                huge = FileRecord(
                    entry.path, entry.size, entry.mtime_ns, digest, "huge", None, empty, ()
                )
                return huge, ()
            data = (self.root / entry.path).read_bytes()
        except OSError:
            return None
        judged = classify(entry.path, data)
        if judged.kind not in RANKED_KINDS:
            unranked = FileRecord(
                entry.path,
                entry.size,
                entry.mtime_ns,
                judged.content_hash,
                judged.kind,
                None,
                empty,
                (),
            )
            return unranked, ()
        text = data.decode("utf-8", errors="replace")
        analysis = analyze(entry.path, text, parse=judged.kind == "code")
        record = FileRecord(
            path=entry.path,
            size=entry.size,
            mtime_ns=entry.mtime_ns,
            content_hash=judged.content_hash,
            kind=judged.kind,
            symbols=analysis.symbols,
            terms=self._vocab.vector(analysis.terms),
            chunks=tuple(self._vocab.vector(c) for c in analysis.chunks),
        )
        return record, analysis.texts

    def _embedded(self, pending: Sequence[tuple[FileRecord, tuple[str, ...]]]) -> list[FileRecord]:
        """The records with their vectors, all their texts embedded in one call."""
        if self._embedder is None:
            return [record for record, _ in pending]
        texts = [text for _, file_texts in pending for text in file_texts]
        if not texts:
            return [record for record, _ in pending]
        vectors = self._embedder.embed(texts).astype(np.float16)
        out: list[FileRecord] = []
        at = 0
        for record, file_texts in pending:
            if file_texts:
                record = replace(record, vectors=vectors[at : at + len(file_texts)])
                at += len(file_texts)
            out.append(record)
        return out

    def _lacks_vectors(self, record: FileRecord) -> bool:
        """Whether a ranked file still needs embedding by the current embedder."""
        if self._embedder is None or record.kind not in RANKED_KINDS:
            return False
        vectors = record.vectors
        return vectors is None or vectors.shape != (len(record.chunks) + 1, self._embedder.dim)

    def _put(self, record: FileRecord) -> None:
        old = self._records.get(record.path)
        # New content under a known path and kind leaves the path lookups valid.
        same_shape = old is not None and old.kind == record.kind
        self._drop(record.path, replacing=same_shape)
        if not same_shape:
            self._path_index = self._kinds = None
        self._records[record.path] = record
        if record.kind not in RANKED_KINDS:
            return
        self._files.put(record.path, *record.terms)
        for i, chunk in enumerate(record.chunks):
            self._chunks.put(f"{record.path}{_CHUNK_SEP}{i}", *chunk)
        if record.vectors is not None and not self._lacks_vectors(record):
            self._vectors.put(record.path, record.vectors)
        self._add_names(record)

    def _drop(self, path: str, *, replacing: bool = False) -> None:
        old = self._records.pop(path, None)
        if old is None:
            return
        if not replacing:
            self._path_index = self._kinds = None
        self._files.remove(path)
        for i in range(len(old.chunks)):
            self._chunks.remove(f"{path}{_CHUNK_SEP}{i}")
        self._vectors.remove(path)
        if old.symbols is not None:
            for name in {symbol.name for symbol in old.symbols.definitions}:
                owners = self._by_name.get(name)
                if owners is not None:
                    owners.pop(path, None)
                    if not owners:
                        del self._by_name[name]

    def _add_names(self, record: FileRecord) -> None:
        if record.symbols is None:
            return
        for symbol in record.symbols.definitions:
            self._by_name.setdefault(symbol.name, {}).setdefault(record.path, []).append(symbol)

    # ----------------------------------------------------------------- queries

    @property
    def paths(self) -> list[str]:
        """Every indexed path."""
        return list(self._records)

    def record(self, path: str) -> FileRecord | None:
        """What the index holds for one path."""
        return self._records.get(path)

    def definitions_named(self, name: str) -> list[tuple[str, Symbol]]:
        """Definitions whose short name is exactly `name`."""
        by_path = self._by_name.get(name, {})
        return [(path, symbol) for path, symbols in by_path.items() for symbol in symbols]

    def search(self, text: str, k: int = 10, *, symbols_per_file: int = 3) -> SearchResult:
        """Files and definitions ranked for a task or a query, freshness checked before serving."""
        started = time.perf_counter()
        self.catch_up()
        query = parse_query(text)
        for _ in range(3):
            files, symbols = self._rank(query, k, symbols_per_file)
            stale = [hit.path for hit in files if not self._is_fresh(hit.path, hit.content_hash)]
            if not stale:
                break
            # A file changed under us: re-read it and rank again, never serve the old text.
            self.stale_caught += len(stale)
            self.refresh_paths(stale)
        took = (time.perf_counter() - started) * 1000
        return SearchResult(
            query=text, files=files, symbols=symbols, took_ms=took, stale_caught=self.stale_caught
        )

    def _rank(
        self, query: TaskQuery, k: int, per_file: int
    ) -> tuple[tuple[FileHit, ...], tuple[SymbolHit, ...]]:
        qvec: dict[int, float] = {}
        for term, count in query.terms.items():
            term_id = self._vocab.get(term)
            if term_id is not None:
                qvec[term_id] = 1.0 + math.log(count)
        w = self.weights
        signals = Signals()
        file_scores = self._files.scores(qvec)
        signals.lexical_file = normalised(_top(self._files, file_scores, 500))
        chunk_scores = self._chunks.scores(qvec)
        chunk_top = _top(self._chunks, chunk_scores, _CHUNK_POOL)
        best_chunk: dict[str, float] = {}
        chunk_norm = max(chunk_top.values(), default=0.0) or 1.0
        chunk_hits: list[tuple[str, str, float]] = []
        for key, score in chunk_top.items():
            path, _, index = key.partition(_CHUNK_SEP)
            if score > best_chunk.get(path, 0.0):
                best_chunk[path] = score
            chunk_hits.append((path, index, score))
        signals.lexical_chunk = normalised(best_chunk)
        semantic_symbols: dict[tuple[str, str], float] = {}
        signals.semantic = self._semantic(query, semantic_symbols)
        signals.identifier, ident_symbols = identifier_scores(query, self.definitions_named)
        if self._path_index is None or self._kinds is None:
            self._path_index = PathIndex(list(self._records))
            self._kinds = {p: r.kind for p, r in self._records.items()}
        signals.mention = mention_scores(query, self._path_index)
        fused = fuse(signals, query, w, self._kinds)
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        top_file = ranked[0][1] if ranked else 1.0
        file_share = {p: s / top_file for p, s in ranked[:200]} if top_file > 0 else {}
        # Definitions are looked up only in files that can still be served.
        symbol_scores: dict[tuple[str, str], float] = {}
        found: dict[tuple[str, str], Symbol] = {}
        for path, index, score in chunk_hits:
            if path not in file_share:
                continue
            symbol = self._symbol(path, int(index))
            if symbol is not None:
                symbol_scores[(path, symbol.qualname)] = score / chunk_norm
                found.setdefault((path, symbol.qualname), symbol)
        for named, bonus in (*ident_symbols.items(), *semantic_symbols.items()):
            symbol_scores[named] = symbol_scores.get(named, 0.0) + bonus
        # Score every candidate definition, but build hits only for the ones served.
        scored: list[tuple[float, str, int, str, Symbol]] = []
        for (path, qualname), score in symbol_scores.items():
            if path not in file_share:
                continue
            symbol = found.get((path, qualname)) or self._named_symbol(path, qualname)
            if symbol is None:
                continue
            total = score + w.symbol_file_share * file_share[path]
            scored.append((-total, path, symbol.line, qualname, symbol))
        # (path, qualname) is unique, so the comparison never reaches the symbol itself.
        scored.sort(key=lambda item: item[:4])
        shown = {path for path, _ in ranked[:k]}
        per_path: dict[str, list[SymbolHit]] = {}
        overall: list[SymbolHit] = []
        wanted = max(k * per_file, 10)
        for negative, path, _, _, symbol in scored:
            mine = per_path.setdefault(path, [])
            want_mine = path in shown and len(mine) < per_file
            if not want_mine and len(overall) >= wanted:
                continue
            hit = _symbol_hit(path, symbol, -negative)
            if want_mine:
                mine.append(hit)
            if len(overall) < wanted:
                overall.append(hit)
        hits = tuple(
            FileHit(
                path=path,
                score=round(score, 6),
                content_hash=self._records[path].content_hash,
                symbols=tuple(per_path.get(path, ())),
            )
            for path, score in ranked[:k]
        )
        return hits, tuple(overall)

    def _named_symbol(self, path: str, qualname: str) -> Symbol | None:
        record = self._records.get(path)
        if record is None or record.symbols is None:
            return None
        return next((s for s in record.symbols.definitions if s.qualname == qualname), None)

    def _semantic(
        self, query: TaskQuery, symbol_scores: dict[tuple[str, str], float]
    ) -> dict[str, float]:
        """Files by their chunk closest in meaning to the task; close chunks lift definitions."""
        w = self.weights
        if self._embedder is None or not len(self._vectors) or w.semantic + w.semantic_symbol <= 0:
            return {}
        vector = self._embedder.embed([query.text])[0]
        if not vector.any():
            return {}
        hits = self._vectors.search(vector, files=_SEMANTIC_FILES, rows=_SEMANTIC_ROWS)
        rows = spread({f"{path}{_CHUNK_SEP}{i}": score for path, i, score in hits.rows})
        for key, score in rows.items():
            path, _, index = key.partition(_CHUNK_SEP)
            symbol = self._symbol(path, int(index))  # None for the file's own row
            if symbol is not None:
                named = (path, symbol.qualname)
                symbol_scores[named] = symbol_scores.get(named, 0.0) + w.semantic_symbol * score
        return spread(hits.files)

    def _symbol(self, path: str, index: int) -> Symbol | None:
        record = self._records.get(path)
        if record is None or record.symbols is None or index >= len(record.symbols.definitions):
            return None
        return record.symbols.definitions[index]

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


def _symbol_hit(path: str, symbol: Symbol, score: float) -> SymbolHit:
    return SymbolHit(
        path=path,
        qualname=symbol.qualname,
        kind=symbol.kind,
        line=symbol.line,
        end_line=symbol.end_line,
        signature=symbol.signature,
        score=round(score, 6),
    )


def _restat(record: FileRecord, entry: Entry) -> FileRecord:
    return replace(record, size=entry.size, mtime_ns=entry.mtime_ns)


def _top(index: Bm25Index, scores: ScoreArray, n: int) -> dict[str, float]:
    positive = int(np.count_nonzero(scores > 0))
    if positive == 0:
        return {}
    n = min(n, positive)
    picked = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    return {index.key_of(int(i)): float(scores[i]) for i in picked if scores[i] > 0}
