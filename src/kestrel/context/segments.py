"""Term-sorted postings of a run of document slots (what a BM25 index searches), the
documents a restored index keeps outside memory, and an index's arrays as a snapshot keeps
them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from kestrel.context.vocab import FloatArray, IntArray

ScoreArray = npt.NDArray[np.float64]


@dataclass(slots=True)
class Segment:
    """Postings of the documents in slots [start, end), grouped by term."""

    start: int
    end: int
    terms: IntArray  # distinct term ids, ascending
    offsets: npt.NDArray[np.int64]  # postings of terms[i] are [offsets[i], offsets[i+1])
    slots: IntArray
    tfs: FloatArray


def build_segment(start: int, docs: list[tuple[IntArray, FloatArray]]) -> Segment:
    if not docs:
        empty_i = np.zeros(0, np.int32)
        return Segment(
            start, start, empty_i, np.zeros(1, np.int64), empty_i, np.zeros(0, np.float32)
        )
    sizes = np.fromiter((len(d[0]) for d in docs), dtype=np.int64, count=len(docs))
    parts = [np.concatenate([d[0] for d in docs]), np.concatenate([d[1] for d in docs])]
    return _grouped(start, sizes, parts)


def bulk_segment(
    docs: Sequence[tuple[IntArray, FloatArray]],
) -> tuple[Segment, ScoreArray, npt.NDArray[np.int64]]:
    """One segment of `docs` from slot 0, each document's length (the sum of its term
    frequencies) and each term's document frequency.

    Built holding as few copies of the postings at once as it can: a whole index at 250,000
    files is two million chunks and tens of millions of postings, and every copy is hundreds
    of megabytes.
    """
    n = len(docs)
    sizes = np.fromiter((len(d[0]) for d in docs), dtype=np.int64, count=n)
    terms = np.concatenate([d[0] for d in docs]) if n else np.zeros(0, np.int32)
    tfs = np.concatenate([d[1] for d in docs]) if n else np.zeros(0, np.float32)
    parts = [terms, tfs]
    del terms, tfs
    return joined_segment(sizes, parts)


def joined_segment(
    sizes: npt.NDArray[np.int64], parts: list[npt.NDArray[Any]]
) -> tuple[Segment, ScoreArray, npt.NDArray[np.int64]]:
    """`bulk_segment` of documents with `sizes` terms each, their term ids and frequencies laid
    end to end in `parts` (emptied as they are used)."""
    terms, tfs = parts
    df = np.bincount(terms, minlength=1).astype(np.int64)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    length = np.bincount(owner, weights=tfs.astype(np.float64), minlength=len(sizes))
    del owner, terms, tfs
    return _grouped(0, sizes, parts), length.astype(np.float64), df


def _grouped(start: int, sizes: npt.NDArray[np.int64], parts: list[npt.NDArray[Any]]) -> Segment:
    """The segment of documents with `sizes` terms each, from their term ids and frequencies
    laid end to end (`parts`, emptied: each is let go as soon as its sorted copy exists)."""
    terms = parts.pop(0)
    order = np.argsort(terms, kind="stable")
    terms = terms[order]
    tfs = parts.pop(0)[order]
    slots = np.repeat(np.arange(start, start + len(sizes), dtype=np.int32), sizes)[order]
    del order
    # The terms are sorted: each group starts where the term changes (no second sort, as
    # `np.unique` would do, with a copy and an index array of its own).
    first = np.flatnonzero(terms[1:] != terms[:-1]) + 1 if len(terms) else np.zeros(0, np.intp)
    if len(terms):
        first = np.concatenate([[0], first])
    offsets = np.append(first, len(terms)).astype(np.int64)
    distinct = terms[first].astype(np.int32)
    return Segment(start, start + len(sizes), distinct, offsets, slots, tfs)


@dataclass(frozen=True, slots=True)
class TailPlan:
    """Segments to build for an index's newest documents, planned under its owner's lock."""

    base: Segment
    tail: tuple[Segment, ...]
    """The segments after the base when planned: installing checks they are still those."""
    ranges: list[tuple[int, int]]
    have: dict[tuple[int, int], Segment]
    todo: dict[tuple[int, int], list[tuple[IntArray, FloatArray]]]

    def build(self) -> dict[tuple[int, int], Segment]:
        """The planned segments not built yet (reads only the documents the plan holds)."""
        return {
            (start, end): build_segment(start, docs) for (start, end), docs in self.todo.items()
        }


def planned_tail(
    tail: Sequence[Segment], covered: int, n: int, max_tail: int
) -> list[tuple[int, int]]:
    """The slot ranges of the segments after the base once slots [covered, n) have theirs.

    Segments merge like the digits of a binary counter (a newer one joins the one before while
    at least half its size), so each document is rebuilt a logarithmic number of times and few
    segments are searched; past `max_tail` segments all merge into one.
    """
    ranges = [(s.start, s.end) for s in tail]
    if covered < n:
        ranges.append((covered, n))
    while len(ranges) >= 2 and 2 * (ranges[-1][1] - ranges[-1][0]) >= (
        ranges[-2][1] - ranges[-2][0]
    ):
        newer, older = ranges.pop(), ranges.pop()
        ranges.append((older[0], newer[1]))
    if len(ranges) > max_tail:
        ranges = [(ranges[0][0], n)]
    return ranges


def term_ranges(segment: Segment, terms: list[int]) -> list[tuple[int, int, int]]:
    """(query position, first, end) of each query term's postings in a segment."""
    # One search for all the query's terms: per-term calls cost a conversion each.
    at = np.searchsorted(segment.terms, np.asarray(terms, dtype=np.int32)).tolist()
    found: list[tuple[int, int, int]] = []
    for i, where in enumerate(at):
        if where >= len(segment.terms) or segment.terms[where] != terms[i]:
            continue
        found.append((i, int(segment.offsets[where]), int(segment.offsets[where + 1])))
    return found


_A = TypeVar("_A", bound=np.generic)


def grown(array: npt.NDArray[_A], size: int) -> npt.NDArray[_A]:
    """`array` with room for `size` items, doubling so appends stay amortised O(1)."""
    if size <= len(array):
        return array
    bigger = np.zeros(max(size, 2 * len(array), 64), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


def best_slots(scores: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.intp]:
    """Up to `n` slots with the highest positive scores, in no particular order.

    Over millions of slots a strided sample first sets a bar that about `3n` of them clear, so
    that only those are gathered and ordered (at two million chunks, 1-2 ms against 5 ms to
    order every reached slot). The bar is only used when at least `n` slots clear it, so the
    result is exactly the `n` best.
    """
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if len(scores) > max(16 * n, 100_000):
        step = len(scores) // 50_000
        sample = scores[::step]
        sample = sample[sample > 0]
        need = 3 * n // step + 1
        if len(sample) > need:
            cut = np.partition(sample, len(sample) - need)[len(sample) - need]
            above = np.flatnonzero(scores >= cut)
            if len(above) >= n:
                return above[np.argpartition(-scores[above], n - 1)[:n]]
    positive = np.flatnonzero(scores > 0)
    if len(positive) <= n:
        return positive
    return positive[np.argpartition(-scores[positive], n - 1)[:n]]


class StoredDocs(Protocol):
    """Documents kept outside the index (a mapped snapshot), in slots 0 to `count` - 1."""

    count: int

    def key(self, slot: int) -> str:
        """The key of a stored slot."""
        ...

    def keys(self, slots: Sequence[int]) -> list[str]:
        """The keys of stored slots, in order."""
        ...

    def find(self, key: str) -> int | None:
        """The stored slot of `key`, if it has one."""
        ...

    def doc(self, slot: int) -> tuple[IntArray, FloatArray]:
        """The vector of a stored slot."""
        ...


@dataclass(frozen=True, slots=True)
class Bm25Export:
    """An index built whole, as arrays: what a snapshot keeps and restores."""

    terms: IntArray
    offsets: npt.NDArray[np.int64]
    slots: IntArray
    tfs: FloatArray
    length: ScoreArray
    df: npt.NDArray[np.int64]
    total_length: float

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The arrays by name (`total_length` aside)."""
        return {name: getattr(self, name) for name in _EXPORTED}


_EXPORTED = ("terms", "offsets", "slots", "tfs", "length", "df")
