"""BM25 postings of documents stored in snapshots, sorted one range of terms at a time.

A whole index's postings are its documents' term vectors regrouped by term. Joined in memory and
sorted at once, the 53 million chunk postings of a 250,000-file tree need the joined columns,
the sort's order and the sorted copies at once: a first index that wrote its snapshot that way
peaked at 2,648 MB, against 1,544 MB this way. Here the per-document lengths and the
per-term document frequencies are counted block by block from the mapped columns, which gives
every array's size and the term offsets before any sorting; the postings themselves are
gathered and sorted one range of terms at a time, as the snapshot writer writes them. The
arrays are the ones `bulk_segment` builds from the same documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from kestrel.context.lexical import Bm25Index
from kestrel.context.snapshot import Array
from kestrel.context.snapshot_runs import Run
from kestrel.context.snapshot_write import Column, Joined

RANGE_POSTINGS = 1 << 22
"""Postings gathered and sorted at once (a term with more is sorted alone)."""
BLOCK_DOCS = 4096
"""Documents counted at once."""


def stored_export(
    runs: Sequence[Run], at: str, ids: str, tfs: str
) -> tuple[dict[str, Column], float]:
    """The export arrays (`Bm25Export.arrays`) of the runs' documents, whose term vectors are
    offsets `at` into columns `ids` and `tfs`, and their total length."""
    runs = [run for run in runs if run.hi > run.lo]
    if not runs:
        empty = Bm25Index().export()  # as a whole index of nothing exports
        assert empty is not None
        return dict(empty.arrays()), empty.total_length
    length, df, bases = _counted(runs, at, ids, tfs)
    distinct = np.flatnonzero(df).astype(np.int32)
    offsets = np.zeros(len(distinct) + 1, dtype=np.int64)
    np.cumsum(df[distinct], out=offsets[1:])
    ranges = _ranges(distinct, offsets)
    count = (int(offsets[-1]),)
    sorted_by = {
        name: Joined(_Sorted(runs, bases, ranges, (at, ids, tfs), name), np.dtype(dtype), count)
        for name, dtype in (("slots", np.int32), ("tfs", np.float32))
    }
    out: dict[str, Column] = {"terms": distinct, "offsets": offsets, **sorted_by}
    out.update(length=length, df=df)
    return out, float(length.sum())


def _counted(runs: Sequence[Run], at: str, ids: str, tfs: str) -> tuple[Array, Array, list[int]]:
    """Each document's length, each term's document count, and each run's first slot."""
    bases = [0]
    for run in runs:
        bases.append(bases[-1] + run.hi - run.lo)
    length = np.zeros(bases[-1], dtype=np.float64)
    df = np.zeros(1, dtype=np.int64)
    for run, base in zip(runs, bases, strict=False):
        offsets, id_col, tf_col = run.at(at), run.source.array(ids), run.source.array(tfs)
        for b0 in range(0, run.hi - run.lo, BLOCK_DOCS):
            b1 = min(b0 + BLOCK_DOCS, run.hi - run.lo)
            p0, p1 = int(offsets[b0]), int(offsets[b1])
            owner = np.repeat(np.arange(b1 - b0), np.diff(offsets[b0 : b1 + 1]))
            weights = tf_col[p0:p1].astype(np.float64)
            length[base + b0 : base + b1] = np.bincount(owner, weights=weights, minlength=b1 - b0)
            counts = np.bincount(id_col[p0:p1], minlength=1)
            if len(counts) > len(df):
                df = np.concatenate([df, np.zeros(len(counts) - len(df), dtype=np.int64)])
            df[: len(counts)] += counts
        run.source.release()
    return length, df, bases


def _ranges(distinct: Array, offsets: Array) -> list[tuple[int, int]]:
    """Term id ranges [lo, hi) of about `RANGE_POSTINGS` postings each, covering `distinct`."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(distinct):
        j = int(np.searchsorted(offsets, offsets[i] + RANGE_POSTINGS, side="right")) - 1
        j = min(max(j, i + 1), len(distinct))
        out.append((int(distinct[i]), int(distinct[j - 1]) + 1))
        i = j
    return out


class _Sorted(Sequence[Array]):
    """The postings' slots or term frequencies, one term range at a time, made when read."""

    def __init__(
        self,
        runs: Sequence[Run],
        bases: list[int],
        ranges: list[tuple[int, int]],
        columns: tuple[str, str, str],
        name: str,
    ) -> None:
        self._runs, self._bases, self._ranges = runs, bases, ranges
        self._columns, self._name = columns, name

    def __len__(self) -> int:
        return len(self._ranges)

    @overload
    def __getitem__(self, index: int) -> Array: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Array]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        lo, hi = self._ranges[index]
        at, ids, tfs = self._columns
        terms: list[Array] = []
        values: list[Array] = []
        for run, base in zip(self._runs, self._bases, strict=False):
            offsets = run.at(at)
            p0, p1 = int(offsets[0]), int(offsets[-1])
            column = run.source.array(ids)[p0:p1]
            found = np.flatnonzero((column >= lo) & (column < hi))
            if not len(found):
                continue
            terms.append(column[found])
            if self._name == "slots":
                docs = np.searchsorted(offsets, found + p0, side="right") - 1
                values.append((docs + base).astype(np.int32))
            else:
                values.append(run.source.array(tfs)[p0:p1][found])
        for run in self._runs:
            run.source.release()
        order = np.argsort(np.concatenate(terms), kind="stable")
        return np.concatenate(values)[order]
