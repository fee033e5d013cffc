"""A snapshot written from bodies already stored in snapshots, run by run, decoding nothing.

Records read from a snapshot (a reopened index, or the parts a big read writes as it goes,
`kestrel.context.whole`) keep their bodies there. A new snapshot of such records copies each
run of records stored one after another in one snapshot (term and chunk vectors, symbols,
definitions, embeddings) straight from the mapped file, and builds the BM25 postings from the
copied term columns: writing the snapshot of 250,000 files then holds arrays, never the
millions of Python objects that decoded bodies are. The file is the one `write_snapshot` would
write of the same records, array for array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kestrel.context.snapshot import Array
from kestrel.context.snapshot_runs import Run, runs_of, sizes_of
from kestrel.context.snapshot_write import (
    Column,
    Joined,
    SnapshotInput,
    between_steps,
    head_columns,
    snapshot_header,
    starts_of,
    string_columns,
    vocab_columns,
    write_columns,
)
from kestrel.context.stored_postings import stored_export

_NAMES_PER_STEP = 4096
"""Names given ids between two calls of a write's `stop`."""


def write_merged(path: Path, data: SnapshotInput, stop: Callable[[], bool] | None = None) -> None:
    """Write the snapshot of `data`'s records, every one stored in a snapshot (its `files` and
    `chunks` postings are ignored: built here from the stored term vectors); `stop`: see
    `write_columns`."""
    ranked, others = runs_of(data.ranked), runs_of(data.others)
    between_steps(stop)
    records = [*data.ranked, *data.others]
    arrays: dict[str, Column] = dict(head_columns(records))
    del records
    between_steps(stop)
    arrays.update(_bodies([*ranked, *others], stop))
    arrays.update(_definitions(ranked, stop))
    arrays.update(vocab_columns(data.terms))
    totals: dict[str, float] = {}
    for prefix, at, ids, tfs, runs in (
        ("f", "terms_at", "term_ids", "term_tfs", ranked),
        ("c", "chunk_terms_at", "chunk_ids", "chunk_tfs", [r.inner("chunks_at") for r in ranked]),
    ):
        between_steps(stop)
        export, totals[prefix] = stored_export(runs, at, ids, tfs)
        arrays.update((f"{prefix}_{name}", column) for name, column in export.items())
    header = snapshot_header(data, len(data.ranked), totals)
    sources = list({id(run.source): run.source for run in [*ranked, *others]}.values())
    write_columns(path, header, arrays, sources, stop)


def _column(runs: Sequence[Run], name: str, dtype: Any, rows: int | None = None) -> Joined:
    """Column `name` of the runs' items laid end to end (`rows` of it, when not one per item)."""
    parts = [run.source.array(name)[run.lo : run.hi] for run in runs]
    count = sum(len(p) for p in parts) if rows is None else rows
    trailing = tuple(parts[0].shape[1:]) if parts else ()
    return Joined(parts, np.dtype(dtype), (count, *trailing))


def _csr(runs: Sequence[Run], at: str, name: str, dtype: Any) -> tuple[Array, Joined]:
    """Offsets `at` and their column `name`, for the runs' records."""
    starts = starts_of(sizes_of(runs, at))
    return starts, _column([r.inner(at) for r in runs], name, dtype, int(starts[-1]))


def _bodies(runs: list[Run], stop: Callable[[], bool] | None = None) -> dict[str, Column]:
    out: dict[str, Column] = {}
    out["terms_at"], out["term_ids"] = _csr(runs, "terms_at", "term_ids", np.int32)
    out["term_tfs"] = _csr(runs, "terms_at", "term_tfs", np.float32)[1]
    between_steps(stop)  # each of these is a pass over every run: thousands after a checkout
    chunks = [run.inner("chunks_at") for run in runs]
    out["chunks_at"] = starts_of(sizes_of(runs, "chunks_at"))
    out["chunk_terms_at"], out["chunk_ids"] = _csr(chunks, "chunk_terms_at", "chunk_ids", np.int32)
    out["chunk_tfs"] = _csr(chunks, "chunk_terms_at", "chunk_tfs", np.float32)[1]
    between_steps(stop)
    out["has_symbols"] = _column(runs, "has_symbols", np.uint8)
    out["symbols_at"], out["symbols"] = _csr(runs, "symbols_at", "symbols", np.uint8)
    out["has_vectors"] = _column(runs, "has_vectors", np.uint8)
    between_steps(stop)
    out["vectors_at"] = starts = starts_of(sizes_of(runs, "vectors_at"))
    dims = {r.source.array("vectors").shape[1] for r in runs if int(starts[-1])}
    dims.discard(0)
    if len(dims) > 1:
        raise ValueError(f"stored vectors of {len(dims)} sizes")
    vectors = [r.inner("vectors_at") for r in runs]
    out["vectors"] = Joined(
        [r.source.array("vectors")[r.lo : r.hi] for r in vectors if r.hi > r.lo],
        np.dtype(np.float16),
        (int(starts[-1]), dims.pop() if dims else 0),
    )
    return out


def _definitions(ranked: list[Run], stop: Callable[[], bool] | None = None) -> dict[str, Column]:
    """The ranked records' definitions, their names given ids in the order first met. `stop`
    is called every few thousand names (a million of them at 250,000 files): see
    `write_columns`."""
    names: dict[str, int] = {}
    parts: list[Array] = []
    done = 0
    for run in (r.inner("def_at") for r in ranked):
        ids = run.source.array("d_name")[run.lo : run.hi]
        if not len(ids):
            continue
        met, first = np.unique(ids, return_index=True)
        lookup = np.zeros(int(met[-1]) + 1, dtype=np.int32)
        for local in met[np.argsort(first, kind="stable")].tolist():
            lookup[local] = names.setdefault(run.source.names.term(local), len(names))
        parts.append(lookup[ids])
        done += len(met)
        if done >= _NAMES_PER_STEP:
            done = 0
            between_steps(stop)
    d_name = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    defs = [r.inner("def_at") for r in ranked]
    out: dict[str, Column] = dict(string_columns("names", list(names)))
    out["name_at"] = starts_of(np.bincount(d_name, minlength=len(names)).astype(np.int64))
    out["name_defs"] = np.argsort(d_name, kind="stable").astype(np.int32)
    out["d_name"] = d_name
    for name, dtype in (("d_kind", np.uint8), ("d_line", np.int32), ("d_end", np.int32)):
        out[name] = _column(defs, name, dtype)
    out["def_at"] = starts_of(sizes_of(ranked, "def_at"))
    for key in ("d_qual", "d_sig"):
        out[f"{key}_at"], out[key] = _csr(defs, f"{key}_at", key, np.uint8)
    return out
