"""Writing the postings snapshot (see `kestrel.context.snapshot` for what it holds)."""

from __future__ import annotations

import array
import contextlib
import json
import os
import re
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from kestrel.context.index_store import symbols_json
from kestrel.context.lexical import Bm25Export
from kestrel.context.model import FILE_KINDS
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import ALIGN, MAGIC, SNAPSHOT_FORMAT, Array, Snapshot, StringTable
from kestrel.context.vocab import StoredThenAdded

_WRITER_PID = re.compile(r"\.(?:part-)?(\d+)(?:-\d+)?\.tmp$")
"""The writer's process id in a temporary snapshot's name (`.NAME.PID.tmp`, or
`.NAME.part-PID-N.tmp` for the parts of a big read)."""
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
    files: Bm25Export | None
    """The postings (None: built from the records' stored bodies, `write_merged`)."""
    chunks: Bm25Export | None
    generation: str | None = None
    written: int | None = None
    nonce: str | None = None
    """Names this write: whoever wrote it can tell its own file from another process's."""
    """The index's write-log position at that generation: a reopen after later writes reads
    only the rows logged since."""
    """The index's generation these records are exactly (None: not known to be any): a reopen
    at that generation takes every record's stat from here instead of reading the index."""


def write_snapshot(path: Path, data: SnapshotInput) -> None:
    """Write the snapshot next to the index, replacing any older one in one rename."""
    records = [*data.ranked, *data.others]
    arrays: dict[str, Column] = dict(head_columns(records))
    arrays.update(_bodies(records))
    arrays.update(_definitions(data.ranked))
    arrays.update(vocab_columns(data.terms))
    assert data.files is not None and data.chunks is not None
    for prefix, export in (("f", data.files), ("c", data.chunks)):
        for name, column in export.arrays().items():
            arrays[f"{prefix}_{name}"] = column
    totals = {"f": data.files.total_length, "c": data.chunks.total_length}
    write_columns(path, snapshot_header(data, len(data.ranked), totals), arrays)


def snapshot_header(data: SnapshotInput, ranked: int, totals: dict[str, float]) -> dict[str, Any]:
    """The header of a snapshot of `data` (its records and postings aside)."""
    return {
        "format": SNAPSHOT_FORMAT,
        "token": data.token,
        "embedder": data.embedder,
        "vocab": len(data.terms),
        "ranked": ranked,
        "kinds": _KINDS,
        "totals": totals,
        "generation": data.generation,
        "written": data.written,
        "nonce": data.nonce,
        "file_kinds": list(FILE_KINDS),
    }


class WriteStopped(OSError):
    """A snapshot write given up on request; the old snapshot stays."""


def write_columns(
    path: Path,
    header: dict[str, Any],
    arrays: dict[str, Column],
    read_from: Sequence[Snapshot] = (),
    stop: Callable[[], bool] | None = None,
) -> None:
    """Write a snapshot's header and columns to `path`, replacing it in one rename; the pages
    of the snapshots `read_from` (whose columns some of `arrays` are) go after each column.
    `stop` is called between steps (each column, each few thousand parts of a joined one): it
    may wait meanwhile (for queries to end), and when it says to stop, WriteStopped is raised
    and nothing replaced."""
    _clear_leftovers(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write(temp, header, arrays, read_from, stop)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _clear_leftovers(path: Path) -> None:
    """Remove what a process that ended while writing left behind (a writer is a thread): at
    once when no process has its id any more (a snapshot of 250,000 files is gigabytes), else
    when it is old."""
    old = time.time() - _LEFTOVER_S
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if not _writer_alive(leftover.name) or leftover.stat().st_mtime < old:
                leftover.unlink()


def _writer_alive(name: str) -> bool:
    """Whether the process whose id a temporary file's name holds may still be writing it."""
    found = _WRITER_PID.search(name)
    if found is None:
        return True  # not named by this code: left to the age limit
    pid = int(found.group(1))
    if pid == os.getpid():
        return True  # another thread of this process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True


def _write(
    path: Path,
    header: dict[str, Any],
    arrays: dict[str, Column],
    read_from: Sequence[Snapshot],
    stop: Callable[[], bool] | None,
) -> None:
    layout: dict[str, list[Any]] = {}
    at = 0
    for name, column in arrays.items():
        layout[name] = [column.dtype.str, list(column.shape), at]
        at += -(-column.nbytes // ALIGN) * ALIGN
    text = json.dumps({**header, "arrays": layout}).encode()
    start = -(-(len(MAGIC) + 8 + len(text)) // ALIGN) * ALIGN
    with path.open("wb") as out:
        out.write(MAGIC + len(text).to_bytes(8, "little") + text)
        for name, column in arrays.items():
            between_steps(stop)
            out.seek(start + layout[name][2])
            if isinstance(column, Joined):
                column.write(out, stop)
            else:
                out.write(np.ascontiguousarray(column).data)
            for snapshot in read_from:
                snapshot.release()
        out.truncate(start + at)


_KINDS = ["class", "function", "method", "interface", "struct", "enum", "trait", "type"]
_KINDS += ["module", "constant"]


def vocab_columns(terms: Sequence[str]) -> dict[str, Array]:
    """The vocabulary's string columns; a vocabulary kept in a snapshot's table has its columns
    extended, not its terms decoded (1.47 million of them, and encoded again, held the
    interpreter for half a second while queries waited)."""
    if isinstance(terms, StoredThenAdded) and isinstance(terms.stored, StringTable):
        return _extended("vocab", terms.stored, terms.added)
    return string_columns("vocab", terms)


def _extended(prefix: str, table: StringTable, added: Sequence[str]) -> dict[str, Array]:
    """`string_columns` of the table's strings then `added`, from the table's columns."""
    if not table.count:
        return string_columns(prefix, added)
    blob, at, hashes, order = table.columns()
    tail = string_columns(prefix, added)
    by_id = np.empty(table.count, dtype=np.uint32)
    by_id[order] = hashes
    added_by_id = np.empty(len(added), dtype=np.uint32)
    added_by_id[tail[f"{prefix}_order"]] = tail[f"{prefix}_hash"]
    every = np.concatenate([by_id, added_by_id])
    every_order = np.argsort(every, kind="stable").astype(np.int32)
    joined = [blob, np.zeros(1, np.uint8), tail[prefix]] if len(added) else [blob]
    return {
        prefix: np.concatenate(joined),
        f"{prefix}_at": np.concatenate([at, at[-1] + tail[f"{prefix}_at"][1:]]),
        f"{prefix}_hash": every[every_order],
        f"{prefix}_order": every_order,
    }


def string_columns(prefix: str, terms: Sequence[str]) -> dict[str, Array]:
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


def head_columns(records: Sequence[FileRecord]) -> dict[str, Array]:
    """Each record's path, hash, stat and kind, for a reopen that need not read the rows."""
    kind_ids = {kind: n for n, kind in enumerate(FILE_KINDS)}
    return {
        "paths": _joined(r.path for r in records),
        "hashes": _joined(r.content_hash for r in records),
        "sizes": np.fromiter((r.size for r in records), dtype=np.int64, count=len(records)),
        "mtimes": np.fromiter((r.mtime_ns for r in records), dtype=np.int64, count=len(records)),
        "file_kind": np.fromiter(
            (kind_ids[r.kind] for r in records), dtype=np.uint8, count=len(records)
        ),
    }


def _joined(items: Any) -> Array:
    return np.frombuffer("\0".join(items).encode(), dtype=np.uint8)


_GROUP = 4096
"""Parts of a `Joined` column written at once."""
_BIG_PART = 1 << 20
"""A part this big is written alone."""


@dataclass(frozen=True, slots=True)
class Joined:
    """Arrays stored one after another as one column, written part by part: the snapshot of a
    big index is gigabytes, and joining its columns in memory first doubled what writing it
    held (the parts are the records' own arrays)."""

    parts: Sequence[Array]
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def write(self, out: BinaryIO, stop: Callable[[], bool] | None = None) -> None:
        # Joined a few thousand parts at a time, never exporting a part's own buffer: numpy
        # keeps a small note of each export for as long as the array lives, and the parts
        # live as long as the index (2 x 36 bytes for each of millions of chunk vectors).
        group: list[Array] = []
        for part in self.parts:
            if part.nbytes >= _BIG_PART:  # a mapped column's run: never copied whole
                _flush(out, group, self.dtype)
                between_steps(stop)
                out.write(np.ascontiguousarray(part.astype(self.dtype, copy=False)).data)
            elif len(part):
                group.append(part)
                if len(group) == _GROUP:
                    _flush(out, group, self.dtype)
                    between_steps(stop)
        _flush(out, group, self.dtype)


def between_steps(stop: Callable[[], bool] | None) -> None:
    """Call a write's `stop` (see `write_columns`): WriteStopped when it says to stop."""
    if stop is not None and stop():
        raise WriteStopped("the snapshot write was stopped")


def _flush(out: BinaryIO, group: list[Array], dtype: np.dtype[Any]) -> None:
    """Write `group` joined, and empty it."""
    if group:
        out.write(np.concatenate(group).astype(dtype, copy=False).data)
        group.clear()


Column = Array | Joined


def starts_of(sizes: Iterable[int] | Array, count: int | None = None) -> Array:
    """Where each of `count` parts of these sizes starts (an array's: all), then the total."""
    if count is None:
        sizes = np.asarray(sizes, dtype=np.int64)
        count = len(sizes)
    starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.fromiter(sizes, dtype=np.int64, count=count), out=starts[1:])
    return starts


def _csr(parts: Sequence[Array], dtype: Any) -> tuple[Array, Joined]:
    starts = starts_of((len(p) for p in parts), len(parts))
    return starts, Joined(parts, np.dtype(dtype), (int(starts[-1]),))


def _bodies(records: Sequence[FileRecord]) -> dict[str, Column]:
    """Each record's body as columns: term vectors, chunk vectors, symbols, embeddings."""
    out: dict[str, Column] = {}
    bodies = [r.peek() for r in records]
    out["terms_at"], out["term_ids"] = _csr([r.terms[0] for r in bodies], np.int32)
    out["term_tfs"] = _csr([r.terms[1] for r in bodies], np.float32)[1]
    chunks = [c for r in bodies for c in r.chunks]
    out["chunks_at"] = starts_of((len(r.chunks) for r in bodies), len(bodies))
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
    out["vectors_at"] = starts = starts_of((len(v) for v in rows), len(rows))
    out["vectors"] = Joined(rows, np.dtype(np.float16), (int(starts[-1]), dim))
    return out


def _definitions(ranked: Sequence[FileRecord]) -> dict[str, Column]:
    """Every definition as columns, and the definitions of each name.

    Gathered in typed arrays and byte buffers, not lists of Python objects: at 250,000 files
    there are millions of definitions, and a list entry per field of each cost more memory
    than the columns themselves.
    """
    names: dict[str, int] = {}
    name_of = array.array("i")
    cols = {"kind": array.array("B"), "line": array.array("i"), "end": array.array("i")}
    texts = {"qual": bytearray(), "sig": bytearray()}
    ends: dict[str, array.array[int]] = {
        "qual": array.array("q", [0]),
        "sig": array.array("q", [0]),
    }
    counts = array.array("q")
    kind_ids = {kind: n for n, kind in enumerate(_KINDS)}
    for record in ranked:
        symbols = record.peek().symbols
        definitions = symbols.definitions if symbols is not None else ()
        counts.append(len(definitions))
        for d in definitions:
            name_of.append(names.setdefault(d.name, len(names)))
            cols["kind"].append(kind_ids[d.kind])
            cols["line"].append(d.line)
            cols["end"].append(d.end_line)
            for key, text in (("qual", d.qualname), ("sig", d.signature)):
                texts[key] += text.encode()
                ends[key].append(len(texts[key]))
    ids = np.frombuffer(name_of, dtype=np.int32) if name_of else np.zeros(0, np.int32)
    out: dict[str, Column] = dict(string_columns("names", list(names)))
    # Each name's definitions, in the order they were met: a stable sort by name id.
    out["name_at"] = starts_of(np.bincount(ids, minlength=len(names)).tolist(), len(names))
    out["name_defs"] = np.argsort(ids, kind="stable").astype(np.int32)
    out["d_name"] = ids
    out["d_kind"] = np.array(cols["kind"], dtype=np.uint8)
    out["d_line"] = np.array(cols["line"], dtype=np.int32)
    out["d_end"] = np.array(cols["end"], dtype=np.int32)
    out["def_at"] = starts_of(counts, len(counts))
    for key in ("qual", "sig"):
        out[f"d_{key}_at"] = np.array(ends[key], dtype=np.int64)
        out[f"d_{key}"] = np.frombuffer(texts[key], dtype=np.uint8)
    return out
