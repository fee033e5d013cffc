"""BM25 over documents held in memory as term-sorted postings, updated in place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from kestrel.context.segments import (
    Bm25Export,
    ScoreArray,
    Segment,
    StoredDocs,
    TailPlan,
    best_slots,
    build_segment,
    bulk_segment,
    grown,
    planned_tail,
    term_ranges,
)
from kestrel.context.vocab import FloatArray, IntArray, Vocabulary

__all__ = ["Bm25Export", "Bm25Index", "FloatArray", "IntArray", "ScoreArray", "Vocabulary"]

_MIN_DOCS_TO_SKIP = 50
MAX_POSTINGS = 250_000
"""Most postings a query scores in full in one index: about 10 ms at 2M chunks, 2 cores."""
RESCORED = 2_000
"""How many of the best slots the terms beyond the budget are added to (`_rescore`)."""
_CROWDED = 0.2
"""Documents added since the base, as a share of the live ones, past which the owner should
rebuild the index whole when convenient (`crowded`): replaced documents stay as dead slots."""
_FOLD_LIMIT = 1.0
"""Past this share, `put` folds everything into a new base itself, whatever it costs then."""
_MAX_TAIL = 8
"""Segments after the base beyond this are merged into one: each costs a pass per query."""
_NORM_DRIFT = 1e-3
"""How far the average document length may move before every slot's normalisation is redone."""
_NORM_REUSE_MIN = 10_000
"""Live documents below which it is redone whenever the average moves at all."""


Term = tuple[int, float, int]
"""A query term to score: (term id, weight, document frequency)."""


def _within_budget(
    query: Mapping[int, float], df: npt.NDArray[np.int64], live: int, max_df_share: float
) -> tuple[list[Term], list[Term]]:
    """The query's terms to score in full, and those to add to the best slots only.

    Near-universal terms are skipped on all but tiny indexes (there every term is common).
    A long task text names terms found in millions of chunks, and scoring all their postings
    cost hundreds of milliseconds; once the rarer terms reach `MAX_POSTINGS` postings, the
    commonest (which weigh least) are scored only for the best slots the rarer ones found.
    """
    known = [(t, w, int(df[t])) for t, w in query.items() if t < len(df) and df[t] > 0]
    if live > _MIN_DOCS_TO_SKIP:
        known = [k for k in known if k[2] <= max_df_share * live]
    if sum(k[2] for k in known) <= MAX_POSTINGS:
        return known, []
    known.sort(key=lambda k: (k[2], k[0]))
    kept: list[Term] = []
    total = 0
    for n, item in enumerate(known):
        total += item[2]
        if kept and total > MAX_POSTINGS:
            return kept, known[n:]
        kept.append(item)
    return kept, []


class Bm25Index:
    """Documents keyed by string; a removed key's slot is dead until the next fold.

    A restored index keeps its first documents in `StoredDocs` (slots below `_first`), and
    holds in memory only the keys and vectors of the documents added since.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._stored: StoredDocs | None = None
        self._first = 0
        """Slots below this are stored; `_keys` and `_docs` hold the slots from it on."""
        self._keys: list[str] = []
        self._slot: dict[str, int] = {}
        """Live keys held in memory (stored keys are found through `_stored`)."""
        self._docs: list[tuple[IntArray, FloatArray]] = []
        self._live = 0
        self._alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._length: ScoreArray = np.zeros(0, dtype=np.float64)
        self._df: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._total_length = 0.0
        self._norm_avg: float | None = None
        """The average length `_norm_cache` was computed with (None: nothing cached)."""
        self._norm_upto = 0
        self._norm_cache: ScoreArray = np.zeros(0, dtype=np.float64)
        self._base = build_segment(0, [])
        self._tail: list[Segment] = []
        """Segments of the documents added since the base, oldest first, largest first."""

    @classmethod
    def restored(cls, export: Bm25Export, stored: StoredDocs, *, k1: float, b: float) -> Bm25Index:
        """An index over `stored` whose postings are `export` (mapped arrays are not copied)."""
        out = cls(k1=k1, b=b)
        n = stored.count
        if len(export.length) != n:
            raise ValueError(f"postings of {len(export.length)} documents for {n} stored")
        out._stored, out._first, out._live = stored, n, n
        out._alive = np.ones(n, dtype=bool)
        out._length = np.array(export.length, dtype=np.float64)
        out._df = np.array(export.df, dtype=np.int64)
        out._total_length = export.total_length
        out._base = Segment(0, n, export.terms, export.offsets, export.slots, export.tfs)
        return out

    def export(self) -> Bm25Export | None:
        """The index as arrays, when it was built whole and nothing changed since."""
        if self._stored is not None or self._tail or self._live != self._base.end:
            return None
        if self._base.end != len(self._keys):
            return None
        b, n = self._base, self._base.end
        return Bm25Export(
            b.terms, b.offsets, b.slots, b.tfs, self._length[:n], self._df, self._total_length
        )

    def __len__(self) -> int:
        return self._live

    def __contains__(self, key: str) -> bool:
        return self._find(key) is not None

    def keys(self) -> list[str]:
        """Keys of the live documents."""
        return [self.key_of(int(s)) for s in np.flatnonzero(self._alive[: self._count()])]

    def key_of(self, slot: int) -> str:
        """The key stored in a slot."""
        if slot < self._first:
            assert self._stored is not None
            return self._stored.key(slot)
        return self._keys[slot - self._first]

    def keys_of(self, slots: list[int]) -> list[str]:
        """The keys stored in these slots, in order (a query's top hits, at once)."""
        first, keys, stored = self._first, self._keys, self._stored
        if stored is None:
            return [keys[s] for s in slots]
        if all(s < first for s in slots):
            return stored.keys(slots)
        key = stored.key
        return [key(s) if s < first else keys[s - first] for s in slots]

    def _count(self) -> int:
        return self._first + len(self._keys)

    def _find(self, key: str) -> int | None:
        slot = self._slot.get(key)
        if slot is None and self._stored is not None:
            slot = self._stored.find(key)
            if slot is not None and not self._alive[slot]:
                return None
        return slot

    def _doc(self, slot: int) -> tuple[IntArray, FloatArray]:
        if slot < self._first:
            assert self._stored is not None
            return self._stored.doc(slot)
        return self._docs[slot - self._first]

    def _docs_in(self, start: int, end: int) -> list[tuple[IntArray, FloatArray]]:
        return [self._doc(s) for s in range(start, end)]

    def bulk_load(self, items: Iterable[tuple[str, IntArray, FloatArray]]) -> None:
        """Replace everything with these documents, built as one segment."""
        self.__init__(k1=self.k1, b=self.b)  # type: ignore[misc]
        latest: dict[str, tuple[IntArray, FloatArray]] = {}
        for key, ids, tfs in items:
            latest[key] = (ids, tfs)
        # Whole-array arithmetic: loading 300,000 chunks one by one took seconds.
        self._keys = list(latest)
        self._slot = {key: slot for slot, key in enumerate(self._keys)}
        self._docs = list(latest.values())
        n = self._live = len(self._docs)
        self._alive = np.ones(n, dtype=bool)
        if n == 0:
            return
        self._base, self._length, self._df = bulk_segment(self._docs)
        self._total_length = float(self._length.sum())
        self._norm_avg = None

    def put(self, key: str, ids: IntArray, tfs: FloatArray) -> None:
        """Add or replace one document."""
        self.remove(key)
        self._append(key, ids, tfs)
        if self._added() > _FOLD_LIMIT * max(self._live, 1000):
            self._fold()

    def crowded(self) -> bool:
        """Whether enough was added since the base that rebuilding whole is worth it now."""
        return self._added() > _CROWDED * max(self._live, 1000)

    def _added(self) -> int:
        return self._count() - self._base.end

    def remove(self, key: str) -> None:
        """Drop one document; absent keys are ignored."""
        slot = self._find(key)
        if slot is None:
            return
        self._slot.pop(key, None)
        ids, _ = self._doc(slot)
        self._alive[slot] = False
        self._live -= 1
        self._df[ids] -= 1
        self._total_length -= self._length[slot]

    def document(self, key: str) -> tuple[IntArray, FloatArray] | None:
        """The stored vector of a live document."""
        slot = self._find(key)
        return None if slot is None else self._doc(slot)

    def scores(self, query: Mapping[int, float], *, max_df_share: float = 0.6) -> ScoreArray:
        """BM25 of every slot for a weighted bag of term ids (dead slots score 0)."""
        n = self._count()
        out = np.zeros(n, dtype=np.float64)
        live = self._live
        if live == 0 or not query:
            return out
        norm = self._norm(n, live)
        full, rest = _within_budget(query, self._df, live, max_df_share)
        terms, weights = self._weighted(full, live)
        if not terms:
            return out
        segments = self._segments()
        # One count over every segment's postings (slots are global): each pass over millions
        # of slots costs milliseconds, so `out` is that count itself.
        slots_parts: list[IntArray] = []
        weight_parts: list[ScoreArray] = []
        for segment in segments:
            for i, lo, hi in term_ranges(segment, terms):
                slots = segment.slots[lo:hi]
                tf = segment.tfs[lo:hi].astype(np.float64)
                slots_parts.append(slots)
                weight_parts.append(weights[i] * tf * (self.k1 + 1.0) / (tf + norm[slots]))
        if slots_parts:
            counted = np.bincount(
                np.concatenate(slots_parts), weights=np.concatenate(weight_parts), minlength=n
            )
            out = np.asarray(counted, dtype=np.float64)
        if live < n:
            out[~self._alive[:n]] = 0.0
        if rest:
            self._rescore(out, segments, *self._weighted(rest, live), norm)
        return out

    def _weighted(self, picked: list[Term], live: int) -> tuple[list[int], list[float]]:
        """Term ids and their BM25 weights (query weight times idf)."""
        terms = [term for term, _, _ in picked]
        weights = [w * float(np.log1p((live - df + 0.5) / (df + 0.5))) for _, w, df in picked]
        return terms, weights

    def _rescore(
        self,
        out: ScoreArray,
        segments: list[Segment],
        terms: list[int],
        weights: list[float],
        norm: ScoreArray,
    ) -> None:
        """Add the terms left out of the full pass to the `RESCORED` best slots.

        Each term's postings are sorted by slot, so finding the best slots in them is a binary
        search each (about 0.1 ms for a term in a million documents, against several to score
        all its postings), and the order at the top is that of full BM25 unless a slot outside
        the `RESCORED` would have climbed into it on these terms, the commonest and lightest.
        """
        reached = np.sort(best_slots(out, RESCORED))
        for segment in segments:
            inside = reached[(reached >= segment.start) & (reached < segment.end)]
            ranges = term_ranges(segment, terms) if len(inside) else []
            if not ranges:
                continue
            # One binary search per term; the rest is done for all the terms at once. The slots
            # sought have the postings' own type: other needles make numpy convert every posting.
            postings = segment.slots
            inside = inside.astype(postings.dtype, copy=False)
            found: list[npt.NDArray[np.intp]] = []
            for _, lo, hi in ranges:
                at = postings[lo:hi].searchsorted(inside)
                np.minimum(at, hi - lo - 1, out=at)
                found.append(at + lo)
            where = np.concatenate(found)
            hit = postings[where] == np.tile(inside, len(ranges))
            which = np.tile(np.arange(len(inside)), len(ranges))[hit]
            tf = segment.tfs[where[hit]].astype(np.float64)
            weight = np.repeat(np.array([weights[i] for i, _, _ in ranges]), len(inside))[hit]
            part = weight * tf * (self.k1 + 1.0) / (tf + norm[inside][which])
            out[inside] += np.bincount(which, weights=part, minlength=len(inside))

    def _norm(self, n: int, live: int) -> ScoreArray:
        """Each slot's length normalisation (computing it for two million chunks took 5-30 ms).

        Kept while the average length stays put, and on a big index while it moves less than
        `_NORM_DRIFT` (a file edited or a checkout read in the background adds slots and moves
        it a little after every batch): only the slots added since are computed then.
        """
        avg = max(self._total_length / live, 1e-9)
        kept = self._norm_avg
        if kept is not None and n >= self._norm_upto:
            close = live >= _NORM_REUSE_MIN and abs(avg - kept) <= _NORM_DRIFT * kept
            if avg == kept or close:
                if n > self._norm_upto:
                    start, self._norm_cache = self._norm_upto, grown(self._norm_cache, n)
                    self._norm_cache[start:n] = self._normalised(self._length[start:n], kept)
                    self._norm_upto = n
                return self._norm_cache[:n]
        self._norm_cache = self._normalised(self._length[:n], avg)
        self._norm_avg, self._norm_upto = avg, n
        return self._norm_cache

    def _normalised(self, lengths: ScoreArray, avg: float) -> ScoreArray:
        return self.k1 * (1.0 - self.b + self.b * lengths / avg)

    def _append(self, key: str, ids: IntArray, tfs: FloatArray) -> None:
        slot = self._count()
        self._live += 1
        self._keys.append(key)
        self._slot[key] = slot
        self._docs.append((ids, tfs))
        self._alive = grown(self._alive, slot + 1)
        self._length = grown(self._length, slot + 1)
        self._alive[slot] = True
        length = float(tfs.sum())
        self._length[slot] = length
        self._total_length += length
        if len(ids):
            self._df = grown(self._df, int(ids.max()) + 1)
            self._df[ids] += 1

    def prepare(self) -> None:
        """Build now the segments a query would need for documents added since the last ones
        (merging older ones as `planned_tail` says), so that the next query does not."""
        plan = self.tail_ahead()
        if plan.todo:
            self.install(plan, plan.build())

    def tail_ahead(self) -> TailPlan:
        """What `prepare` would merge, to build off the owner's lock (`TailPlan.build` reads
        only documents that never change), then `install` under it. The newest documents get
        a small segment now, so queries meanwhile only add later ones."""
        n = self._count()
        covered = self._tail[-1].end if self._tail else self._base.end
        if covered < n:
            self._tail = [*self._tail, build_segment(covered, self._docs_in(covered, n))]
        have = {(s.start, s.end): s for s in self._tail}
        ranges = planned_tail(self._tail, n, n, _MAX_TAIL)
        todo = {r: self._docs_in(*r) for r in ranges if r not in have}
        return TailPlan(self._base, tuple(self._tail), ranges, have, todo)

    def install(self, plan: TailPlan, built: dict[tuple[int, int], Segment]) -> bool:
        """Serve the segments `plan` built, before any added since; False (nothing changed)
        when the index was rebuilt or its segments replaced meanwhile."""
        k = len(plan.tail)
        if plan.base is not self._base or list(map(id, plan.tail)) != list(map(id, self._tail[:k])):
            return False
        merged = [plan.have[r] if r in plan.have else built[r] for r in plan.ranges]
        self._tail = merged + self._tail[k:]
        return True

    def _segments(self) -> list[Segment]:
        """The base, then segments for the documents added since, built as queries need them.

        Only the documents added since the last query get a new segment, so a query costs
        little however many came before. Merging is left to `prepare` while segments are few:
        the indexing side calls it after its changes (off the lock in the background).
        """
        n = self._count()
        covered = self._tail[-1].end if self._tail else self._base.end
        if covered < n:
            if len(self._tail) < _MAX_TAIL:
                self._tail = [*self._tail, build_segment(covered, self._docs_in(covered, n))]
            else:
                self.prepare()
        return [self._base, *self._tail]

    def _fold(self) -> None:
        slots = np.flatnonzero(self._alive[: self._count()]).tolist()
        live = [(self.key_of(s), *self._doc(s)) for s in slots]
        self.bulk_load(live)
