"""The fair queue: tiers first, ageing so that nobody starves, tenants paced, on a fake clock."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.server.queue import FairQueue


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drain(queue: FairQueue[str]) -> list[str]:
    """Every item, in the order the queue hands them out."""
    return [queue.get_nowait() for _ in range(len(queue))]


async def test_a_paid_item_goes_ahead_of_twenty_free_ones() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock)
    for i in range(20):
        queue.put(f"free-{i}", tier=0, tenant=f"t{i % 3}")
        clock.now += 1
    queue.put("paid", tier=1, tenant="rich")

    assert queue.position("paid") == 0
    assert await queue.get() == "paid"
    assert len(queue) == 20


def test_older_first_within_a_tier() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock, tenant_stride_s=0)
    for name in ["a", "b", "c"]:
        queue.put(name, tier=1, tenant=name)
        clock.now += 1
    assert drain(queue) == ["a", "b", "c"]


def test_a_free_item_that_waited_longer_than_the_tier_weight_beats_a_new_paid_one() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock, tier_weight_s=60)
    queue.put("free", tier=0, tenant="f")
    clock.now = 61
    queue.put("paid", tier=1, tenant="p")
    assert drain(queue) == ["free", "paid"]


def test_a_free_item_is_not_starved_by_a_stream_of_paid_ones() -> None:
    # One worker takes an item every 10 s while a paid item arrives every 10 s, after a
    # backlog of five paid items: the free item waits for the backlog and for the paid items put
    # within tier_weight_s of it, and no more.
    clock = Clock()
    weight, interval, backlog = 60.0, 10.0, 5
    queue: FairQueue[str] = FairQueue(clock=clock, tier_weight_s=weight)
    for i in range(backlog):
        queue.put(f"paid-early-{i}", tier=1, tenant=f"p{i}")
    queue.put("free", tier=0, tenant="f")
    got: list[str] = []
    for step in range(100):
        clock.now += interval
        queue.put(f"paid-{step}", tier=1, tenant=f"q{step}")
        got.append(queue.get_nowait())
        if got[-1] == "free":
            break
    bound = backlog + int(weight / interval) + 1
    assert "free" in got and len(got) <= bound


def test_without_ageing_the_free_item_would_starve() -> None:
    # The same stream with ageing turned off (an enormous weight) shows the test above can fail.
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock, tier_weight_s=1e12)
    queue.put("free", tier=0, tenant="f")
    for step in range(100):
        clock.now += 10
        queue.put(f"paid-{step}", tier=1, tenant=f"q{step}")
        assert queue.get_nowait() != "free"


def test_one_tenants_burst_does_not_block_another_tenants_item() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock, tenant_stride_s=5)
    for i in range(50):
        queue.put(f"a-{i}", tier=0, tenant="a")
    clock.now = 1
    queue.put("b-0", tier=0, tenant="b")
    assert queue.position("b-0") == 1
    assert drain(queue)[:3] == ["a-0", "b-0", "a-1"]


def test_tenants_putting_at_the_same_moment_take_turns() -> None:
    queue: FairQueue[str] = FairQueue(clock=Clock())
    for i in range(3):
        queue.put(f"a-{i}", tier=0, tenant="a")
    for i in range(3):
        queue.put(f"b-{i}", tier=0, tenant="b")
    assert drain(queue) == ["a-0", "b-0", "a-1", "b-1", "a-2", "b-2"]


def test_a_tenant_putting_slowly_has_no_lead() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock, tenant_stride_s=5)
    queue.put("a-0", tier=0, tenant="a")
    clock.now = 10
    queue.put("a-1", tier=0, tenant="a")
    clock.now = 11
    queue.put("b-0", tier=0, tenant="b")
    assert drain(queue) == ["a-0", "a-1", "b-0"]


def test_remove_and_position() -> None:
    clock = Clock()
    queue: FairQueue[str] = FairQueue(clock=clock)
    for name in ["a", "b", "c", "d"]:
        queue.put(name, tier=0, tenant=name)
        clock.now += 1

    assert [queue.position(n) for n in "abcd"] == [0, 1, 2, 3]
    assert queue.remove("b") is True
    assert queue.remove("b") is False
    assert queue.remove("zz") is False
    assert queue.position("b") is None
    assert [queue.position(n) for n in "acd"] == [0, 1, 2]
    assert len(queue) == 3
    assert drain(queue) == ["a", "c", "d"]
    assert queue.position("a") is None


async def test_get_waits_for_a_put() -> None:
    queue: FairQueue[str] = FairQueue(clock=Clock())
    waiting = asyncio.ensure_future(queue.get())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done()
    queue.put("x", tier=0, tenant="t")
    assert await waiting == "x"
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()


async def test_a_tenant_at_its_running_limit_is_skipped_until_one_finishes() -> None:
    clock = Clock()
    limits = {"a": 1, "b": None}
    queue: FairQueue[str] = FairQueue(clock=clock, max_running=limits.get)
    queue.put("a-0", tier=2, tenant="a")
    queue.put("a-1", tier=2, tenant="a")
    queue.put("b-0", tier=0, tenant="b")

    assert await queue.get() == "a-0"
    assert await queue.get() == "b-0"  # a-1 goes first by priority, but a is at its limit
    assert queue.running("a") == 1
    waiting = asyncio.ensure_future(queue.get())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done()

    queue.finished("a")
    assert await waiting == "a-1"
    assert queue.running("a") == 1
    with pytest.raises(ValueError, match="no item out"):
        queue.finished("nobody")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        FairQueue(tier_weight_s=-1)
    with pytest.raises(ValueError):
        FairQueue(tenant_stride_s=float("inf"))
    queue: FairQueue[str] = FairQueue()
    with pytest.raises(TypeError):
        queue.put("x", tier=1.5, tenant="t")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        queue.put("x", tier=0, tenant="")


PUT = st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 40))
STEP = st.one_of(st.tuples(st.just("put"), PUT), st.tuples(st.just("get"), st.none()))


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEP, max_size=60), stride=st.sampled_from([0, 5]))
def test_no_item_is_overtaken_by_one_put_well_after_it(
    steps: list[tuple[str, tuple[int, int, int] | None]], stride: int
) -> None:
    # The documented bound: an item of tier t put at p goes out before every item of tier u put
    # after p + L + (u - t) * weight, where L is at most one stride per earlier put of its tenant.
    clock, weight = Clock(), 30
    queue: FairQueue[int] = FairQueue(clock=clock, tier_weight_s=weight, tenant_stride_s=stride)
    put: dict[int, tuple[float, int, float]] = {}  # item -> (put at, tier, most lead)
    earlier = {tenant: 0 for tenant in range(4)}
    waiting: set[int] = set()
    got: list[int] = []

    def check(item: int) -> None:
        at, tier, _ = put[item]
        for other in waiting:
            o_at, o_tier, o_lead = put[other]
            assert at <= o_at + o_lead + (tier - o_tier) * weight, (item, other)

    for kind, args in [*steps, *[("get", None)] * 60]:
        if kind == "put" and args is not None:
            tier, tenant, wait = args
            clock.now += wait
            item = len(put)
            put[item] = (clock.now, tier, stride * earlier[tenant])
            earlier[tenant] += 1
            queue.put(item, tier=tier, tenant=f"t{tenant}")
            waiting.add(item)
        elif waiting:
            expected_next = [i for i in waiting if queue.position(i) == 0]
            item = queue.get_nowait()
            assert expected_next == [item]
            waiting.discard(item)
            check(item)
            got.append(item)
        else:
            with pytest.raises(asyncio.QueueEmpty):
                queue.get_nowait()
        assert len(queue) == len(waiting)
    assert sorted(got) == list(range(len(put)))
