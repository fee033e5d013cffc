"""The queue of sessions waiting for a worker: higher tiers first, older first, nobody starved.

An item's priority is `tier * tier_weight_s + seconds it has waited`: a paid item goes ahead of
free ones, but a free item that has waited `tier_weight_s` longer than a tier-1 item goes ahead
of it. Every waiting item ages at the same rate, so the order of two items never changes while
they wait, and each item can be given a fixed key when it is put; `get` hands out the smallest:

    key = put_at + lead - tier * tier_weight_s

`lead` keeps tenants of one tier from queueing behind each other's bursts. Each tenant has a
clock that moves `tenant_stride_s` ahead for every item it puts and never falls behind real
time; an item counts as put at that clock's time. A tenant that puts an item now and then has
no lead; one that puts 50 at once has them spread over 50 strides, so another tenant's item put
a moment later waits behind the first few of them, not behind all 50.

Starvation bound: an item of tier `t` put at time `p` with lead `L` goes out before every item
of tier `u` put after `p + L + (u - t) * tier_weight_s`: a later item's key is larger. So a free
item waits at most for the items queued when it came and those put in the next
`L + top_tier * tier_weight_s` seconds (defaults, top tier 2: four minutes' worth), plus, with
`max_running`, for its own tenant's sessions to make room. `L` is 0 unless its tenant put items
faster than one a stride, and at most one stride for each item its tenant put before it.

For use from one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_Entry = tuple[float, int, T]  # (key, order of put, item): the order breaks ties of keys


class FairQueue(Generic[T]):
    """A priority queue with ageing and per-tenant pacing that feeds a pool of workers."""

    def __init__(
        self,
        *,
        tier_weight_s: float = 120.0,
        tenant_stride_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        max_running: Callable[[str], int | None] | None = None,
    ) -> None:
        """`max_running(tenant)`: how many of the tenant's items may be out at once (None: any).

        With it, `get` skips a tenant while that many of its items are out, until `finished`.
        """
        for name, value in (("tier_weight_s", tier_weight_s), ("tenant_stride_s", tenant_stride_s)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds ≥ 0, not {value}")
        self._weight = tier_weight_s
        self._stride = tenant_stride_s
        self._clock = clock
        self._max_running = max_running
        self._heaps: dict[str, list[_Entry[T]]] = {}
        self._paced: dict[str, float] = {}  # each tenant's clock
        self._running: dict[str, int] = {}
        self._order = itertools.count()
        self._size = 0
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        """How many items wait."""
        return self._size

    def put(self, item: T, *, tier: int, tenant: str) -> None:
        """Queue `item` for `tenant` with the priority of `tier` (higher goes first)."""
        if not isinstance(tier, int) or isinstance(tier, bool):
            raise TypeError(f"tier must be an int, not {type(tier).__name__}")
        if not isinstance(tenant, str) or not tenant:
            raise ValueError(f"tenant must be a non-empty string, not {tenant!r}")
        now = self._clock()
        start = max(now, self._paced.get(tenant, now))
        self._paced[tenant] = start + self._stride
        entry = (start - tier * self._weight, next(self._order), item)
        heapq.heappush(self._heaps.setdefault(tenant, []), entry)
        self._size += 1
        self._changed.set()

    def get_nowait(self) -> T:
        """The first item that may go out now; `asyncio.QueueEmpty` if there is none."""
        tenant = self._next_tenant()
        if tenant is None:
            raise asyncio.QueueEmpty
        heap = self._heaps[tenant]
        item = heapq.heappop(heap)[2]
        if not heap:
            del self._heaps[tenant]
        self._size -= 1
        self._running[tenant] = self._running.get(tenant, 0) + 1
        return item

    async def get(self) -> T:
        """The first item that may go out, waiting for one if there is none."""
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                # No await since the check: nothing can have been put in between.
                self._changed.clear()
            await self._changed.wait()

    def finished(self, tenant: str) -> None:
        """One item of `tenant` handed out by `get` is done, making room under `max_running`."""
        running = self._running.get(tenant, 0)
        if running == 0:
            raise ValueError(f"tenant {tenant!r} has no item out to finish")
        if running == 1:
            del self._running[tenant]
        else:
            self._running[tenant] = running - 1
        self._changed.set()

    def running(self, tenant: str) -> int:
        """How many of `tenant`'s items `get` handed out that are not `finished` yet."""
        return self._running.get(tenant, 0)

    def remove(self, item: T) -> bool:
        """Take a waiting item out (its session was cancelled); False if it is not waiting."""
        found = self._locate(item)
        if found is None:
            return False
        tenant, index = found
        heap = self._heaps[tenant]
        heap[index] = heap[-1]
        heap.pop()
        if heap:
            heapq.heapify(heap)
        else:
            del self._heaps[tenant]
        self._size -= 1
        return True

    def position(self, item: T) -> int | None:
        """How many waiting items go out before `item` (0: it is next); None if not waiting.

        Tenants at their `max_running` are not skipped here, so with it this is an estimate.
        """
        found = self._locate(item)
        if found is None:
            return None
        tenant, index = found
        mine = self._heaps[tenant][index][:2]
        return sum(1 for heap in self._heaps.values() for entry in heap if entry[:2] < mine)

    def _locate(self, item: T) -> tuple[str, int] | None:
        for tenant, heap in self._heaps.items():
            for index, entry in enumerate(heap):
                if entry[2] is item or entry[2] == item:
                    return tenant, index
        return None

    def _next_tenant(self) -> str | None:
        best: str | None = None
        for tenant, heap in self._heaps.items():
            if not self._may_run(tenant):
                continue
            if best is None or heap[0][:2] < self._heaps[best][0][:2]:
                best = tenant
        return best

    def _may_run(self, tenant: str) -> bool:
        limit = None if self._max_running is None else self._max_running(tenant)
        return limit is None or self._running.get(tenant, 0) < limit
