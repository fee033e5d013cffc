"""What the index keeps about one file: a stat, a hash and a kind, then a body read on demand.

A record loaded from the postings snapshot holds only where its body is: the symbols, term
vectors and chunk vectors are decoded the first time something asks for them, so that reopening
a big index does not decode hundreds of thousands of definitions that no query may need.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from kestrel.context.lexical import FloatArray, IntArray
from kestrel.context.model import FileKind, FileSymbols, Symbol

Terms = tuple[IntArray, FloatArray]
Vectors16 = npt.NDArray[np.float16]


class Body(NamedTuple):
    """The decoded part of a record."""

    symbols: FileSymbols | None
    terms: Terms
    chunks: tuple[Terms, ...]
    vectors: Vectors16 | None


class BodySource(Protocol):
    """Where a lazy record's body is kept: an immutable store, so a body never changes."""

    def body(self, index: int) -> Body:
        """The body of the record stored at `index`."""
        ...

    def chunk_count(self, index: int) -> int:
        """How many chunks that record has, without decoding them."""
        ...

    def vector_shape(self, index: int) -> tuple[int, int] | None:
        """The shape of that record's vectors (None without), without decoding them."""
        ...

    def definitions(self, index: int) -> tuple[Symbol, ...] | None:
        """That record's definitions, without its body (None: decode the body)."""
        ...

    def definitions_at(self, wanted: Sequence[tuple[int, int]]) -> list[Symbol | None]:
        """Single definitions, (record index, position) each, decoded in one pass."""
        ...


class FileRecord:
    """Everything the index keeps about one file; equal records are the same object."""

    __slots__ = (
        "_body",
        "_defs",
        "_index",
        "_picked",
        "_source",
        "content_hash",
        "kind",
        "mtime_ns",
        "path",
        "size",
    )

    def __init__(
        self,
        path: str,
        size: int,
        mtime_ns: int,
        content_hash: str,
        kind: FileKind,
        symbols: FileSymbols | None,
        terms: Terms,
        chunks: tuple[Terms, ...],
        vectors: Vectors16 | None = None,
    ) -> None:
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self.content_hash = content_hash
        self.kind: FileKind = kind
        self._body: Body | None = Body(symbols, terms, chunks, vectors)
        self._defs: tuple[Symbol, ...] | None = None
        self._picked: dict[int, Symbol | None] | None = None
        """Definitions decoded one by one from the snapshot (`prefetch_definitions`)."""
        self._source: BodySource | None = None
        self._index = -1

    @classmethod
    def lazy(
        cls,
        head: tuple[str, int, int, str, FileKind],
        source: BodySource,
        index: int,
    ) -> FileRecord:
        """A record whose body is decoded from `source` when first read."""
        record = cls.__new__(cls)
        record.path, record.size, record.mtime_ns, record.content_hash, record.kind = head
        record._body = record._defs = record._picked = None
        record._source = source
        record._index = index
        return record

    def restat(self, size: int, mtime_ns: int) -> FileRecord:
        """The same content under a new stat (the body is shared, decoded or not)."""
        record = FileRecord.__new__(FileRecord)
        record.path, record.content_hash, record.kind = self.path, self.content_hash, self.kind
        record.size, record.mtime_ns = size, mtime_ns
        record._body, record._source, record._index = self._body, self._source, self._index
        record._defs, record._picked = self._defs, self._picked
        return record

    @property
    def loaded(self) -> bool:
        """Whether the body is decoded (always, for records not read from a snapshot)."""
        return self._body is not None

    @property
    def snapshot_slot(self) -> tuple[BodySource, int] | None:
        """Where the body is stored, for records read from a snapshot."""
        return None if self._source is None else (self._source, self._index)

    def peek(self) -> Body:
        """The body, decoded for this call only when it is not held (as a snapshot writer reads
        every record once: keeping them all decoded would undo the lazy opening)."""
        body = self._body
        if body is None:
            assert self._source is not None
            body = self._source.body(self._index)
        return body

    def _decoded(self) -> Body:
        body = self._body
        if body is None:
            assert self._source is not None
            # Decoding twice on two threads gives equal bodies: no lock needed.
            body = self._body = self._source.body(self._index)
        return body

    @property
    def symbols(self) -> FileSymbols | None:
        """Definitions, references and imports (None for files not parsed)."""
        return self._decoded().symbols

    @property
    def terms(self) -> Terms:
        """The file's term ids and weights, ids ascending."""
        return self._decoded().terms

    @property
    def chunks(self) -> tuple[Terms, ...]:
        """One term vector per definition."""
        return self._decoded().chunks

    @property
    def chunk_count(self) -> int:
        """`len(chunks)`, without decoding them."""
        if self._body is None and self._source is not None:
            return self._source.chunk_count(self._index)
        return len(self._decoded().chunks)

    def definition(self, index: int) -> Symbol | None:
        """The record's `index`-th definition, without decoding the rest of the body."""
        picked = self._picked
        if picked is not None and self._defs is None and index in picked:
            return picked[index]
        definitions = self._definitions()
        return definitions[index] if 0 <= index < len(definitions) else None

    def definition_named(self, qualname: str) -> Symbol | None:
        """The record's definition with this qualified name."""
        return next((s for s in self._definitions() if s.qualname == qualname), None)

    def _definitions(self) -> Sequence[Symbol]:
        if self._defs is not None:
            return self._defs
        if self._body is None and self._source is not None:
            stored = self._defs = self._source.definitions(self._index)
            if stored is not None:
                return stored
        symbols = self._decoded().symbols
        return () if symbols is None else symbols.definitions

    @property
    def vector_shape(self) -> tuple[int, int] | None:
        """`vectors.shape`, without decoding the body."""
        if self._body is None and self._source is not None:
            return self._source.vector_shape(self._index)
        vectors = self._decoded().vectors
        return None if vectors is None else (int(vectors.shape[0]), int(vectors.shape[1]))

    @property
    def vectors(self) -> Vectors16 | None:
        """One unit vector per chunk, then one for the file: shape (len(chunks) + 1, dim)."""
        return self._decoded().vectors

    def __repr__(self) -> str:
        return f"FileRecord({self.path!r}, {self.kind}, {self.content_hash[:8]})"


def prefetch_definitions(wanted: Iterable[tuple[FileRecord, int]]) -> None:
    """Decode these definitions of records read from a snapshot in one pass per snapshot.

    A query asks for a few definitions in each of a few hundred files: decoding just those
    costs a fraction of decoding every definition of those files.
    """
    by_source: dict[int, tuple[BodySource, list[tuple[FileRecord, int]]]] = {}
    for record, index in wanted:
        source = record._source
        if source is None or record._defs is not None or record._body is not None:
            continue
        picked = record._picked
        if picked is not None and index in picked:
            continue
        by_source.setdefault(id(source), (source, []))[1].append((record, index))
    for source, todo in by_source.values():
        unique = list(dict.fromkeys(todo))
        symbols = source.definitions_at([(r._index, i) for r, i in unique])
        for (record, index), symbol in zip(unique, symbols, strict=True):
            if record._picked is None:
                record._picked = {}
            record._picked[index] = symbol


class KindsOf(Mapping[str, str]):
    """Each path's kind, read from the records themselves: nothing to build on opening or to
    keep up to date."""

    def __init__(self, records: Mapping[str, FileRecord]) -> None:
        self._records = records

    def __getitem__(self, path: str) -> str:
        return self._records[path].kind

    def get(self, path: str, default: str | None = None) -> str | None:  # type: ignore[override]
        record = self._records.get(path)
        return default if record is None else record.kind

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def of_kind(self, kind: str, paths: Iterable[str]) -> set[str]:
        """Those of `paths` whose record is of `kind` (one pass: a query asks about thousands)."""
        get = self._records.get
        return {p for p in paths if (r := get(p)) is not None and r.kind == kind}
