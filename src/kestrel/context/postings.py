"""The searchable side of the index: BM25 over files and definitions, vectors and names."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kestrel.context.lexical import Bm25Export, Bm25Index
from kestrel.context.names import Names
from kestrel.context.record import FileRecord
from kestrel.context.semantic import VectorIndex
from kestrel.context.snapshot import Snapshot
from kestrel.context.stored import CHUNK_SEP, StoredChunks, StoredFiles, exported

__all__ = ["CHUNK_SEP", "HasVectors", "Postings"]


HasVectors = Callable[[FileRecord], bool]
_K1 = 1.2
_FILE_B = 0.75
_CHUNK_B = 0.5
"""Definitions vary less in length than files; normalising less keeps long ones findable."""


class Postings:
    """What queries read, for the ranked files it was given; `held` says which record each has.

    Built whole (after loading, and after bulk changes, possibly on another thread) or changed
    one file at a time.
    """

    def __init__(self) -> None:
        self.files = Bm25Index(k1=_K1, b=_FILE_B)
        self.chunks = Bm25Index(k1=_K1, b=_CHUNK_B)
        self.vectors = VectorIndex()
        self.names = Names()
        """Definitions by short name, then by path: dropping a file touches only its names."""
        self.held: dict[str, FileRecord] = {}
        self.source: Snapshot | None = None
        """The snapshot these postings were restored from (None: built in memory)."""

    @classmethod
    def restored(
        cls, snapshot: Snapshot, ranked: Sequence[FileRecord | None], has_vectors: HasVectors
    ) -> Postings:
        """The postings a snapshot holds, for its ranked records still current.

        `ranked[i]` is the record of the snapshot's ranked slot i, None where the file changed
        or went since: those slots are dropped, nothing else is built.
        """
        out = cls()
        files = StoredFiles(snapshot)
        out.files = Bm25Index.restored(exported(snapshot, "f"), files, k1=_K1, b=_FILE_B)
        chunks = StoredChunks(snapshot, files)
        out.chunks = Bm25Index.restored(exported(snapshot, "c"), chunks, k1=_K1, b=_CHUNK_B)
        out.names = Names(snapshot, files)
        out.held = {r.path: r for r in ranked if r is not None}
        out.source = snapshot
        for slot, record in enumerate(ranked):
            if record is None:
                path = snapshot.paths[slot]
                out.files.remove(path)
                for i in range(snapshot.chunk_count(slot)):
                    out.chunks.remove(f"{path}{CHUNK_SEP}{i}")
                out.names.remove(path, None)
        if snapshot.array("has_vectors").any():
            out.vectors.bulk_load(
                (r.path, r.vectors)  # type: ignore[misc]
                for r in out.held.values()
                if r.vector_shape is not None and has_vectors(r)
            )
        return out

    def exports(self) -> tuple[Bm25Export, Bm25Export] | None:
        """The BM25 postings as arrays, when built whole and unchanged since (for a snapshot)."""
        files, chunks = self.files.export(), self.chunks.export()
        return None if files is None or chunks is None else (files, chunks)

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
            out.names.add(record)
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
        self.names.add(record)

    def crowded(self) -> bool:
        """Whether so much was replaced since they were built that building afresh pays."""
        return self.files.crowded() or self.chunks.crowded()

    def prepare(self) -> None:
        """Index what was added for querying now, so that the next query does not pay for it."""
        self.files.prepare()
        self.chunks.prepare()

    def tails_ahead(self) -> Callable[[], Callable[[], None]]:
        """`prepare` in three steps, for a writer in the background: this (under the lock)
        plans; calling what it returns builds, off the lock, while queries go on; calling what
        that returns serves the result (under the lock again). See `Bm25Index.tail_ahead`."""
        plans = [(index, index.tail_ahead()) for index in (self.files, self.chunks)]

        def build() -> Callable[[], None]:
            built = [(index, plan, plan.build()) for index, plan in plans]

            def install() -> None:
                for index, plan, segments in built:
                    index.install(plan, segments)

            return install

        return build

    def remove(self, path: str) -> None:
        """Forget `path`; absent paths are ignored."""
        old = self.held.pop(path, None)
        if old is None:
            return
        self.files.remove(path)
        for i in range(old.chunk_count):
            self.chunks.remove(f"{path}{CHUNK_SEP}{i}")
        self.vectors.remove(path)
        self.names.remove(path, old)
