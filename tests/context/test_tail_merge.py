"""Segments after a BM25 index's base: merged like a binary counter, and off the lock."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kestrel.context.lexical import Bm25Index, Vocabulary
from kestrel.context.segments import build_segment, planned_tail


def added(index: Bm25Index, vocab: Vocabulary, first: int, count: int) -> None:
    for i in range(first, first + count):
        index.put(f"new{i}.py", *vocab.vector({f"t{i % 7}": 1.0, "shared": 2.0}))


def fresh_index() -> tuple[Bm25Index, Vocabulary]:
    vocab = Vocabulary()
    index = Bm25Index()
    index.bulk_load(
        (f"f{i}.py", *vocab.vector({f"t{i % 5}": 1.0, "shared": 1.0})) for i in range(400)
    )
    return index, vocab


def ranges(index: Bm25Index) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in index._segments()[1:]]


def test_the_plan_merges_like_a_binary_counter() -> None:
    tail = []
    for n in range(1, 200):
        planned = planned_tail(tail, n - 1, n, max_tail=8)
        sizes = [end - start for start, end in planned]
        assert planned[0][0] == 0 and planned[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(planned))
        assert all(2 * newer < older for older, newer in itertools.pairwise(sizes))
        assert len(planned) <= n.bit_length()
        empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
        tail = [build_segment(start, [empty] * (end - start)) for start, end in planned]


def test_past_the_limit_the_plan_is_one_segment() -> None:
    empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
    # Sizes that never merge (each newer one under half the one before), nine of them.
    tail, start = [], 0
    for size in (3**k for k in range(10, 1, -1)):
        tail.append(build_segment(start, [empty] * size))
        start += size
    assert len(planned_tail(tail, start, start, max_tail=9)) == 9
    assert planned_tail(tail, start, start, max_tail=8) == [(0, start)]


def test_queries_add_small_segments_and_prepare_merges_them() -> None:
    index, vocab = fresh_index()
    query = {vocab.intern("t3"): 1.0, vocab.intern("shared"): 0.5}
    for step in range(5):
        added(index, vocab, step, 1)
        index.scores(query)  # a query between updates builds the newest segment only
    assert [end - start for start, end in ranges(index)] == [1, 1, 1, 1, 1]
    index.prepare()  # the writer merges them, as a binary counter would
    assert ranges(index) == [(400, 405)]


def test_a_plan_built_off_the_lock_serves_the_same_scores() -> None:
    index, vocab = fresh_index()
    query = {vocab.intern("t3"): 1.0, vocab.intern("shared"): 0.5}
    added(index, vocab, 0, 40)
    plan = index.tail_ahead()
    built = plan.build()
    assert index.install(plan, built)
    got = index.scores(query)
    other, vocab2 = fresh_index()
    added(other, vocab2, 0, 40)
    other.prepare()
    assert ranges(index) == ranges(other)
    np.testing.assert_allclose(got, other.scores(query))


def test_segments_a_query_adds_meanwhile_are_kept_after_the_plan_s() -> None:
    index, vocab = fresh_index()
    query = {vocab.intern("t3"): 1.0, vocab.intern("shared"): 0.5}
    for step in range(3):
        added(index, vocab, 10 * step, 10)
        index.scores(query)
    plan = index.tail_ahead()
    built = plan.build()
    added(index, vocab, 40, 3)
    index.scores(query)  # a query meanwhile made a segment of its own
    index.remove("new41.py")
    assert index.install(plan, built)
    assert ranges(index) == [(400, 430), (430, 433)]
    # The same changes with no plan: the same slots, so the same scores, slot by slot.
    same, vocab_same = fresh_index()
    added(same, vocab_same, 0, 30)
    added(same, vocab_same, 40, 3)
    same.remove("new41.py")
    np.testing.assert_allclose(index.scores(query), same.scores(query))
    assert sorted(index.keys()) == sorted(same.keys())


def test_a_plan_is_dropped_when_the_index_is_rebuilt_meanwhile() -> None:
    index, vocab = fresh_index()
    added(index, vocab, 0, 40)
    plan = index.tail_ahead()
    index.bulk_load([])
    assert not index.install(plan, plan.build())
    assert len(index) == 0
    assert index.scores({vocab.intern("shared"): 1.0}).shape == (0,)


@pytest.mark.parametrize("count", [1, 9, 64])
def test_prepare_keeps_scores_exact(count: int) -> None:
    index, vocab = fresh_index()
    query = {vocab.intern("t2"): 1.0, vocab.intern("shared"): 1.0}
    added(index, vocab, 0, count)
    index.prepare()
    whole = Bm25Index()
    vocab_whole = vocab
    whole.bulk_load(
        [(f"f{i}.py", *vocab_whole.vector({f"t{i % 5}": 1.0, "shared": 1.0})) for i in range(400)]
        + [
            (f"new{i}.py", *vocab_whole.vector({f"t{i % 7}": 1.0, "shared": 2.0}))
            for i in range(count)
        ]
    )
    np.testing.assert_allclose(index.scores(query), whole.scores(query))
