"""Writing the postings snapshot (see `kestrel.context.snapshot` for what it holds)."""

from __future__ import annotations

import contextlib
import json
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kestrel.context.index_store import symbols_json
from kestrel.context.lexical import Bm25Export
from kestrel.context.model import FILE_KINDS
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import ALIGN, MAGIC, SNAPSHOT_FORMAT, Array

_LEFTOVER_S = 3600
"""A temporary snapshot file this old was left by a process that ended while writing it."""


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
    generation: str | None = None
    written: int | None = None
    """The index's write-log position at that generation: a reopen after later writes reads
    only the rows logged since."""
    """The index's generation these records are exactly (None: not known to be any): a reopen
    at that generation takes every record's stat from here instead of reading the index."""


def write_snapshot(path: Path, data: SnapshotInput) -> None:
    """Write the snapshot next to the index, replacing any older one in one rename."""
    arrays: dict[str, Array] = {}
    records = [*data.ranked, *data.others]
    arrays["paths"] = _joined(r.path for r in records)
    arrays["hashes"] = _joined(r.content_hash for r in records)
    arrays.update(_heads(records))
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
        "generation": data.generation,
        "written": data.written,
        "file_kinds": list(FILE_KINDS),
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
        at += -(-array.nbytes // ALIGN) * ALIGN
    text = json.dumps({**header, "arrays": layout}).encode()
    start = -(-(len(MAGIC) + 8 + len(text)) // ALIGN) * ALIGN
    with path.open("wb") as out:
        out.write(MAGIC + len(text).to_bytes(8, "little") + text)
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


def _heads(records: Sequence[FileRecord]) -> dict[str, Array]:
    """Each record's stat and kind, for a reopen that need not read the index's rows."""
    kind_ids = {kind: n for n, kind in enumerate(FILE_KINDS)}
    return {
        "sizes": np.fromiter((r.size for r in records), dtype=np.int64, count=len(records)),
        "mtimes": np.fromiter((r.mtime_ns for r in records), dtype=np.int64, count=len(records)),
        "file_kind": np.fromiter(
            (kind_ids[r.kind] for r in records), dtype=np.uint8, count=len(records)
        ),
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
