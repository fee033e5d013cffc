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

import contextlib
import json
import mmap
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.context.index_store import symbols_from_json, symbols_json
from kestrel.context.lexical import Bm25Export
from kestrel.context.model import Symbol
from kestrel.context.record import Body, FileRecord

SNAPSHOT_FORMAT = 1
"""Bump when the layout below changes: an older snapshot is then ignored and rewritten."""
SNAPSHOT_FILE_NAME = "postings.snap"
_MAGIC = b"KESTREL-POSTINGS\n"
_ALIGN = 64
_LEFTOVER_S = 3600
"""A temporary snapshot file this old was left by a process that ended while writing it."""
Array = npt.NDArray[Any]


class SnapshotUnusable(Exception):
    """The snapshot cannot serve this index: missing, damaged, or made for another one."""


@dataclass(frozen=True, slots=True)
class SnapshotInput:
    """What a snapshot is written from: records (the ranked ones first) and their postings."""

    token: str
    embedder: str | None
    terms: Sequence[str]
    ranked: Sequence[FileRecord]
    others: Sequence[FileRecord]
    files: Bm25Export
    chunks: Bm25Export


def snapshot_path(index_path: Path) -> Path:
    """Where the snapshot of the index at `index_path` lives."""
    return index_path.with_name(SNAPSHOT_FILE_NAME)


def write_snapshot(path: Path, data: SnapshotInput) -> None:
    """Write the snapshot next to the index, replacing any older one in one rename."""
    arrays: dict[str, Array] = {}
    records = [*data.ranked, *data.others]
    arrays["paths"] = _joined(r.path for r in records)
    arrays["hashes"] = _joined(r.content_hash for r in records)
    arrays.update(_bodies(records))
    arrays.update(_definitions(data.ranked))
    arrays.update(_strings("vocab", data.terms))
    for prefix, export in (("f", data.files), ("c", data.chunks)):
        for name, array in export.arrays().items():
            arrays[f"{prefix}_{name}"] = array
    header: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "token": data.token,
        "embedder": data.embedder,
        "vocab": len(data.terms),
        "ranked": len(data.ranked),
        "kinds": _KINDS,
        "totals": {"f": data.files.total_length, "c": data.chunks.total_length},
    }
    _clear_leftovers(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write(temp, header, arrays)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _clear_leftovers(path: Path) -> None:
    """Remove what a process that ended while writing left behind (a writer is a thread)."""
    old = time.time() - _LEFTOVER_S
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < old:
                leftover.unlink()


def _write(path: Path, header: dict[str, Any], arrays: dict[str, Array]) -> None:
    layout: dict[str, list[Any]] = {}
    at = 0
    for name, array in arrays.items():
        layout[name] = [array.dtype.str, list(array.shape), at]
        at += -(-array.nbytes // _ALIGN) * _ALIGN
    text = json.dumps({**header, "arrays": layout}).encode()
    start = -(-(len(_MAGIC) + 8 + len(text)) // _ALIGN) * _ALIGN
    with path.open("wb") as out:
        out.write(_MAGIC + len(text).to_bytes(8, "little") + text)
        for name, array in arrays.items():
            out.seek(start + layout[name][2])
            out.write(np.ascontiguousarray(array).tobytes())
        out.truncate(start + at)


_KINDS = ["class", "function", "method", "interface", "struct", "enum", "trait", "type"]
_KINDS += ["module", "constant"]


def _strings(prefix: str, terms: Sequence[str]) -> dict[str, Array]:
    """Strings joined, where each starts, and their CRC-32s sorted, for lookups by string."""
    encoded = [t.encode() for t in terms]
    lengths = np.fromiter((len(t) + 1 for t in encoded), dtype=np.int64, count=len(encoded))
    hashes = np.fromiter((zlib.crc32(t) for t in encoded), dtype=np.uint32, count=len(encoded))
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    return {
        prefix: np.frombuffer(b"\0".join(encoded), dtype=np.uint8),
        f"{prefix}_at": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        f"{prefix}_hash": hashes[order],
        f"{prefix}_order": order,
    }


def _joined(items: Any) -> Array:
    return np.frombuffer("\0".join(items).encode(), dtype=np.uint8)


def _csr(parts: Sequence[Array], dtype: Any) -> tuple[Array, Array]:
    sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    return starts, flat


def _bodies(records: Sequence[FileRecord]) -> dict[str, Array]:
    """Each record's body as columns: term vectors, chunk vectors, symbols, embeddings."""
    out: dict[str, Array] = {}
    bodies = [r.peek() for r in records]
    out["terms_at"], out["term_ids"] = _csr([r.terms[0] for r in bodies], np.int32)
    out["term_tfs"] = _csr([r.terms[1] for r in bodies], np.float32)[1]
    chunks = [c for r in bodies for c in r.chunks]
    out["chunks_at"] = _csr([np.zeros(len(r.chunks)) for r in bodies], np.int8)[0]
    out["chunk_terms_at"], out["chunk_ids"] = _csr([c[0] for c in chunks], np.int32)
    out["chunk_tfs"] = _csr([c[1] for c in chunks], np.float32)[1]
    texts = [b"" if r.symbols is None else symbols_json(r.symbols).encode() for r in bodies]
    out["has_symbols"] = np.array([r.symbols is not None for r in bodies], dtype=np.uint8)
    out["symbols_at"], out["symbols"] = _csr([np.frombuffer(t, np.uint8) for t in texts], np.uint8)
    vectors = [r.vectors for r in bodies]
    dims = {v.shape[1] for v in vectors if v is not None}
    dim = dims.pop() if len(dims) == 1 else 0
    kept = [v if v is not None and dim and v.shape[1] == dim else None for v in vectors]
    out["has_vectors"] = np.array([v is not None for v in kept], dtype=np.uint8)
    rows = [np.zeros((0, dim), np.float16) if v is None else v for v in kept]
    out["vectors_at"] = _csr([np.zeros(len(v)) for v in rows], np.int8)[0]
    out["vectors"] = np.concatenate(rows).astype(np.float16) if rows else np.zeros((0, 0))
    return out


def _definitions(ranked: Sequence[FileRecord]) -> dict[str, Array]:
    """Every definition as columns, and the definitions of each name."""
    names: dict[str, list[int]] = {}
    cols: dict[str, list[Any]] = {k: [] for k in ("kind", "line", "end")}
    quals: list[bytes] = []
    sigs: list[bytes] = []
    counts: list[int] = []
    kind_ids = {kind: n for n, kind in enumerate(_KINDS)}
    for record in ranked:
        symbols = record.peek().symbols
        definitions = symbols.definitions if symbols is not None else ()
        counts.append(len(definitions))
        for d in definitions:
            names.setdefault(d.name, []).append(len(quals))
            cols["kind"].append(kind_ids[d.kind])
            cols["line"].append(d.line)
            cols["end"].append(d.end_line)
            quals.append(d.qualname.encode())
            sigs.append(d.signature.encode())
    order = {name: n for n, name in enumerate(names)}
    out: dict[str, Array] = _strings("names", list(names))
    out["name_at"], out["name_defs"] = _csr([np.array(v) for v in names.values()], np.int32)
    ids = np.empty(len(quals), dtype=np.int32)
    for name, defs in names.items():
        ids[defs] = order[name]
    out["d_name"] = ids
    out["d_kind"] = np.array(cols["kind"], dtype=np.uint8)
    out["d_line"] = np.array(cols["line"], dtype=np.int32)
    out["d_end"] = np.array(cols["end"], dtype=np.int32)
    out["def_at"] = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    for key, texts in (("qual", quals), ("sig", sigs)):
        out[f"d_{key}_at"], out[f"d_{key}"] = _csr(
            [np.frombuffer(t, np.uint8) for t in texts], np.uint8
        )
    return out


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
            self._header, self._arrays = _read(self._map)
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
        self._kinds: list[str] = header["kinds"]
        self.paths = _split(a["paths"])
        self.hashes = _split(a["hashes"])
        self._text: tuple[bytes, bytes, bytes] | None = None
        self.slot_of = {p: n for n, p in enumerate(self.paths)}
        """Each path's record index (the ranked records come first)."""
        self.vocab = StringTable(a, "vocab")
        self.names = StringTable(a, "names")
        if self.vocab.count != self.vocab_size:
            raise ValueError("its vocabulary is damaged")
        if len(self.paths) != len(self.hashes) or len(a["terms_at"]) != len(self.paths) + 1:
            raise ValueError("its tables disagree")
        if len(self.slot_of) != len(self.paths):
            raise ValueError("it holds a path twice")

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

    def definitions_named(self, name_id: int) -> tuple[list[int], list[Symbol]]:
        """The ranked slot and the definition of each definition named `names[name_id]`."""
        a = self._arrays
        defs = a["name_defs"][int(a["name_at"][name_id]) : int(a["name_at"][name_id + 1])]
        slots = np.searchsorted(a["def_at"], defs, side="right") - 1
        return slots.tolist(), self.symbols(defs)

    def symbols(self, def_ids: Array) -> list[Symbol]:
        """Definitions by id, decoded column by column."""
        a = self._arrays
        if self._text is None:
            # Decoded in pieces from three blobs of a few megabytes, each copied once.
            self._text = (a["d_qual"].tobytes(), a["d_sig"].tobytes(), a["names"].tobytes())
        quals, sigs, names = self._text
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
                name=names[n0:n1].decode(),
                qualname=quals[q0:q1].decode(),
                kind=kinds[kind],
                line=line,
                end_line=end,
                signature=sigs[s0:s1].decode(),
            )
            for n0, n1, q0, q1, s0, s1, kind, line, end in columns
        ]


def _split(blob: Array) -> list[str]:
    return blob.tobytes().decode().split("\0") if len(blob) else []


def _read(buffer: mmap.mmap) -> tuple[dict[str, Any], dict[str, Array]]:
    if buffer[: len(_MAGIC)] != _MAGIC:
        raise ValueError("not a postings snapshot")
    size = int.from_bytes(buffer[len(_MAGIC) : len(_MAGIC) + 8], "little")
    end = len(_MAGIC) + 8 + size
    header = json.loads(buffer[len(_MAGIC) + 8 : end])
    if header.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"format {header.get('format')}, not {SNAPSHOT_FORMAT}")
    start = -(-end // _ALIGN) * _ALIGN
    arrays: dict[str, Array] = {}
    for name, (dtype, shape, offset) in header["arrays"].items():
        count = int(np.prod(shape)) if shape else 1
        flat = np.frombuffer(buffer, dtype=np.dtype(dtype), count=count, offset=start + offset)
        arrays[name] = flat.reshape(shape)
    return header, arrays
