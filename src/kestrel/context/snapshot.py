"""The postings snapshot: what a reopened index needs before its first query, in one file.

Beside the SQLite index, `postings.snap` holds the records' bodies (term vectors, chunk vectors,
symbol tables, embeddings) and the BM25 postings and definition names built from them, as flat
arrays after a JSON header. Opening maps the file and decodes nothing: a record's body is
decoded when something reads it, and a query reads only the postings of its own terms.

The snapshot is a cache of a cache. It says which content (path and hash) each body belongs to;
the SQLite rows remain the truth, and a file whose row no longer matches is taken from SQLite
instead. A snapshot written for another database (its term ids differ) or in another format is
not used.
"""

from __future__ import annotations

import functools
import json
import mmap
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.context.index_store import Head, symbols_from_json
from kestrel.context.model import Symbol
from kestrel.context.record import Body

SNAPSHOT_FORMAT = 1
"""Bump when the layout below changes: an older snapshot is then ignored and rewritten."""
SNAPSHOT_FILE_NAME = "postings.snap"
MAGIC = b"KESTREL-POSTINGS\n"
ALIGN = 64
Array = npt.NDArray[Any]


class SnapshotUnusable(Exception):
    """The snapshot cannot serve this index: missing, damaged, or made for another one."""


def snapshot_path(index_path: Path) -> Path:
    """Where the snapshot of the index at `index_path` lives."""
    return index_path.with_name(SNAPSHOT_FILE_NAME)


class StringTable:
    """Stored strings, looked up by CRC-32 then compared: nothing is decoded whole."""

    def __init__(self, arrays: dict[str, Array], prefix: str) -> None:
        self._blob = arrays[prefix]
        self._at = arrays[f"{prefix}_at"]
        self._hashes = arrays[f"{prefix}_hash"]
        self._order = arrays[f"{prefix}_order"]
        self.count = len(self._hashes)
        if len(self._at) != self.count + 1 or len(self._order) != self.count:
            raise ValueError(f"the {prefix} tables disagree")

    def find(self, text: str) -> int | None:
        """The id of `text`, if stored."""
        data = text.encode()
        crc = zlib.crc32(data)
        # A scalar of the array's own type: a Python int would convert the whole array.
        at = int(np.searchsorted(self._hashes, np.uint32(crc)))
        while at < self.count and int(self._hashes[at]) == crc:
            found = int(self._order[at])
            if self._bytes(found) == data:
                return found
            at += 1
        return None

    def starts(self) -> Array:
        """Where each string starts in the joined blob (one past the end, last)."""
        return self._at

    def columns(self) -> tuple[Array, Array, Array, Array]:
        """The joined strings, their starts, their sorted CRC-32s and the ids in that order."""
        return self._blob, self._at, self._hashes, self._order

    def term(self, string_id: int) -> str:
        """The string with a stored id."""
        return self._bytes(string_id).decode()

    def all(self) -> list[str]:
        """Every stored string, by id."""
        return self._blob.tobytes().decode().split("\0") if self.count else []

    def _bytes(self, string_id: int) -> bytes:
        return self._blob[int(self._at[string_id]) : int(self._at[string_id + 1]) - 1].tobytes()


class Snapshot:
    """A mapped snapshot: records' bodies and definitions decoded one at a time, on demand."""

    def __init__(self, path: Path) -> None:
        try:
            with path.open("rb") as stream:
                self._map = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
            self._header, self._arrays, self._at = _read(self._map)
            self._tables()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotUnusable(f"{path.name}: {exc}") from exc

    def _tables(self) -> None:
        a, header = self._arrays, self._header
        self.token: str = header["token"]
        self.embedder: str | None = header["embedder"]
        self.ranked: int = header["ranked"]
        self.vocab_size: int = header["vocab"]
        self.totals: dict[str, float] = header["totals"]
        self.generation: str | None = _optional(header, "generation", str)
        """The index generation the records are exactly, when known (older snapshots: None)."""
        self.written: int | None = _optional(header, "written", int)
        """The index's write-log position at that generation."""
        self.nonce: str | None = _optional(header, "nonce", str)
        """What its writer named this write (older snapshots: None)."""
        self._kinds: list[str] = header["kinds"]
        self.paths = _split(a["paths"])
        self.hashes = _split(a["hashes"])
        self.vocab = StringTable(a, "vocab")
        self.names = StringTable(a, "names")
        if self.vocab.count != self.vocab_size:
            raise ValueError("its vocabulary is damaged")
        if len(self.paths) != len(self.hashes) or len(a["terms_at"]) != len(self.paths) + 1:
            raise ValueError("its tables disagree")

    def release(self) -> None:
        """Let the pages read so far go from this process's memory: they stay in the page
        cache, and reading them again maps them again (mapped pages count in its RSS)."""
        advise = getattr(self._map, "madvise", None)
        if advise is not None and hasattr(mmap, "MADV_DONTNEED"):
            advise(mmap.MADV_DONTNEED)

    @functools.cached_property
    def slot_of(self) -> dict[str, int]:
        """Each path's record index (the ranked records come first); built when first needed
        (a reopen that takes the stats from here needs none)."""
        return dict(zip(self.paths, range(len(self.paths)), strict=True))

    @property
    def has_heads(self) -> bool:
        """Whether every record's stat is stored (`heads`)."""
        return "file_kinds" in self._header and "sizes" in self._arrays

    def heads(self) -> list[Head] | None:
        """Every record's path, stat, hash and kind, in slot order (None: not stored)."""
        a = self._arrays
        kinds = self._header.get("file_kinds")
        if kinds is None or "sizes" not in a:
            return None
        try:
            names = [kinds[k] for k in a["file_kind"].tolist()]
        except (IndexError, TypeError) as exc:
            raise SnapshotUnusable(f"its file kinds are damaged: {exc}") from exc
        sizes, mtimes = a["sizes"].tolist(), a["mtimes"].tolist()
        if not len(names) == len(sizes) == len(mtimes) == len(self.paths):
            raise SnapshotUnusable("its file tables disagree")
        return list(zip(self.paths, sizes, mtimes, self.hashes, names, strict=True))

    def array(self, name: str) -> Array:
        """One stored array, read-only, mapped rather than read."""
        return self._arrays[name]

    def body(self, index: int) -> Body:
        """The body of record `index`."""
        a = self._arrays
        lo, hi = int(a["terms_at"][index]), int(a["terms_at"][index + 1])
        terms = (a["term_ids"][lo:hi], a["term_tfs"][lo:hi])
        c_lo, c_hi = int(a["chunks_at"][index]), int(a["chunks_at"][index + 1])
        at = a["chunk_terms_at"][c_lo : c_hi + 1].tolist()
        ids, tfs = a["chunk_ids"], a["chunk_tfs"]
        chunks = tuple((ids[at[i] : at[i + 1]], tfs[at[i] : at[i + 1]]) for i in range(len(at) - 1))
        symbols = None
        if a["has_symbols"][index]:
            s_lo, s_hi = int(a["symbols_at"][index]), int(a["symbols_at"][index + 1])
            symbols = symbols_from_json(a["symbols"][s_lo:s_hi].tobytes())
        vectors = None
        if a["has_vectors"][index]:
            v_lo, v_hi = int(a["vectors_at"][index]), int(a["vectors_at"][index + 1])
            vectors = a["vectors"][v_lo:v_hi]
        return Body(symbols, terms, chunks, vectors)

    def chunk_count(self, index: int) -> int:
        """How many chunks record `index` has."""
        at = self._arrays["chunks_at"]
        return int(at[index + 1] - at[index])

    def vector_shape(self, index: int) -> tuple[int, int] | None:
        """The shape of record `index`'s vectors, or None."""
        a = self._arrays
        if not a["has_vectors"][index]:
            return None
        rows = int(a["vectors_at"][index + 1] - a["vectors_at"][index])
        return rows, int(a["vectors"].shape[1])

    def definitions(self, index: int) -> tuple[Symbol, ...] | None:
        """Record `index`'s definitions (ranked records only), without decoding its body."""
        if index >= self.ranked:
            return None
        at = self._arrays["def_at"]
        return tuple(self.symbols(np.arange(int(at[index]), int(at[index + 1]))))

    def definitions_at(self, wanted: Sequence[tuple[int, int]]) -> list[Symbol | None]:
        """Single definitions, (record index, position) each; None where there is none."""
        if not wanted:
            return []
        at = self._arrays["def_at"]
        slots = np.array([w[0] for w in wanted], dtype=np.int64)
        positions = np.array([w[1] for w in wanted], dtype=np.int64)
        ranked = slots < self.ranked
        first = at[np.where(ranked, slots, 0)]
        ids = first + positions
        ok = ranked & (positions >= 0) & (ids < at[np.where(ranked, slots + 1, 0)])
        out: list[Symbol | None] = [None] * len(wanted)
        for n, symbol in zip(np.flatnonzero(ok).tolist(), self.symbols(ids[ok]), strict=True):
            out[n] = symbol
        return out

    def definition_count(self, name_id: int) -> int:
        """How many definitions are named `names[name_id]`."""
        at = self._arrays["name_at"]
        return int(at[name_id + 1] - at[name_id])

    def definitions_named(self, name_id: int) -> tuple[list[int], list[Symbol]]:
        """The ranked slot and the definition of each definition named `names[name_id]`."""
        a = self._arrays
        defs = a["name_defs"][int(a["name_at"][name_id]) : int(a["name_at"][name_id + 1])]
        slots = np.searchsorted(a["def_at"], defs, side="right") - 1
        return slots.tolist(), self.symbols(defs)

    def symbols(self, def_ids: Array) -> list[Symbol]:
        """Definitions by id, decoded column by column."""
        a = self._arrays
        # Sliced from the mapping itself: each piece is copied, never a whole blob.
        text, (quals, sigs, names) = self._map, (self._at[k] for k in ("d_qual", "d_sig", "names"))
        ids = np.asarray(def_ids, dtype=np.int64)
        name_ids = a["d_name"][ids]
        n_at = self.names.starts()
        columns = zip(
            n_at[name_ids].tolist(),
            (n_at[name_ids + 1] - 1).tolist(),
            a["d_qual_at"][ids].tolist(),
            a["d_qual_at"][ids + 1].tolist(),
            a["d_sig_at"][ids].tolist(),
            a["d_sig_at"][ids + 1].tolist(),
            a["d_kind"][ids].tolist(),
            a["d_line"][ids].tolist(),
            a["d_end"][ids].tolist(),
            strict=True,
        )
        kinds = self._kinds
        return [
            Symbol(
                name=text[names + n0 : names + n1].decode(),
                qualname=text[quals + q0 : quals + q1].decode(),
                kind=kinds[kind],
                line=line,
                end_line=end,
                signature=text[sigs + s0 : sigs + s1].decode(),
            )
            for n0, n1, q0, q1, s0, s1, kind, line, end in columns
        ]


def _optional(header: dict[str, Any], key: str, kind: type) -> Any:
    """A header value that may be missing (older snapshots), else must be of `kind`."""
    value = header.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ValueError(f"its {key} is damaged")
    return value


def _split(blob: Array) -> list[str]:
    return blob.tobytes().decode().split("\0") if len(blob) else []


def _read(buffer: mmap.mmap) -> tuple[dict[str, Any], dict[str, Array], dict[str, int]]:
    """The header, every array (mapped), and where each array starts in the file."""
    if buffer[: len(MAGIC)] != MAGIC:
        raise ValueError("not a postings snapshot")
    size = int.from_bytes(buffer[len(MAGIC) : len(MAGIC) + 8], "little")
    end = len(MAGIC) + 8 + size
    header = json.loads(buffer[len(MAGIC) + 8 : end])
    if header.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"format {header.get('format')}, not {SNAPSHOT_FORMAT}")
    start = -(-end // ALIGN) * ALIGN
    arrays: dict[str, Array] = {}
    starts: dict[str, int] = {}
    for name, (dtype, shape, offset) in header["arrays"].items():
        starts[name] = start + offset
        count = int(np.prod(shape)) if shape else 1
        flat = np.frombuffer(buffer, dtype=np.dtype(dtype), count=count, offset=start + offset)
        arrays[name] = flat.reshape(shape)
    return header, arrays, starts
