"""The searchable side of the index: BM25 over files and definitions, vectors and names."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kestrel.context.index_store import FileRecord
from kestrel.context.lexical import Bm25Index
from kestrel.context.model import Symbol
from kestrel.context.semantic import VectorIndex

CHUNK_SEP = "\0"
"""Joins a path and a definition's position into a chunk key."""

HasVectors = Callable[[FileRecord], bool]


class Postings:
    """What queries read, for the ranked files it was given; `held` says which record each has.

    Built whole (after loading, and after bulk changes, possibly on another thread) or changed
    one file at a time.
    """

    def __init__(self) -> None:
        self.files = Bm25Index(k1=1.2, b=0.75)
        # Definitions vary less in length than files; normalising less keeps long ones findable.
        self.chunks = Bm25Index(k1=1.2, b=0.5)
        self.vectors = VectorIndex()
        self.by_name: dict[str, dict[str, tuple[Symbol, ...]]] = {}
        """Definitions by short name, then by path: dropping a file touches only its names.

        Tuples, not lists: with only tuples and strings inside, the garbage collector skips them.
        """
        self.held: dict[str, FileRecord] = {}

    @classmethod
    def built(cls, records: Iterable[FileRecord], has_vectors: HasVectors) -> Postings:
        """Postings of these ranked records, built in one pass each."""
        out = cls()
        out.held = {r.path: r for r in records}
        ranked = list(out.held.values())
        out.files.bulk_load((r.path, *r.terms) for r in ranked)
        out.chunks.bulk_load(
            (f"{r.path}{CHUNK_SEP}{i}", *chunk) for r in ranked for i, chunk in enumerate(r.chunks)
        )
        out.vectors.bulk_load(
            (r.path, r.vectors) for r in ranked if r.vectors is not None and has_vectors(r)
        )
        for record in ranked:
            out._add_names(record)
        return out

    def add(self, record: FileRecord, has_vectors: HasVectors) -> None:
        """Hold `record` for its path, replacing what was held."""
        self.remove(record.path)
        self.held[record.path] = record
        self.files.put(record.path, *record.terms)
        for i, chunk in enumerate(record.chunks):
            self.chunks.put(f"{record.path}{CHUNK_SEP}{i}", *chunk)
        if has_vectors(record) and record.vectors is not None:
            self.vectors.put(record.path, record.vectors)
        self._add_names(record)

    def crowded(self) -> bool:
        """Whether so much was replaced since they were built that building afresh pays."""
        return self.files.crowded() or self.chunks.crowded()

    def prepare(self) -> None:
        """Index what was added for querying now, so that the next query does not pay for it."""
        self.files.prepare()
        self.chunks.prepare()

    def remove(self, path: str) -> None:
        """Forget `path`; absent paths are ignored."""
        old = self.held.pop(path, None)
        if old is None:
            return
        self.files.remove(path)
        for i in range(len(old.chunks)):
            self.chunks.remove(f"{path}{CHUNK_SEP}{i}")
        self.vectors.remove(path)
        if old.symbols is not None:
            for name in {symbol.name for symbol in old.symbols.definitions}:
                owners = self.by_name.get(name)
                if owners is not None:
                    owners.pop(path, None)
                    if not owners:
                        del self.by_name[name]

    def _add_names(self, record: FileRecord) -> None:
        if record.symbols is None:
            return
        mine: dict[str, list[Symbol]] = {}
        for symbol in record.symbols.definitions:
            mine.setdefault(symbol.name, []).append(symbol)
        for name, symbols in mine.items():
            self.by_name.setdefault(name, {})[record.path] = tuple(symbols)
