"""Live events for many followers from one poll: a stream per follower, one query for all.

A session's events are appended by its own process, so the server learns of them by polling
the log. Polling once per client would cost a query per client every 50 ms; instead one task asks
the log for the last event number of every followed session, and wakes only the streams whose
session moved on. Each stream then reads its new events from the durable log, so a slow client
only falls behind and holds nothing in memory.

With a `Carrier` (Redis streams, in cluster mode: `events_redis.RedisCarrier`) records appended
by a session in any process arrive here as they are logged and are handed to the followers
directly, in order; the log is read only to catch up: at the start, after a gap in the carried
numbers, when a follower fell too far behind, and when the carrier comes back after an outage.
The poll goes on, slower (`carried_poll_s`), in case a record never reached the carrier, and at
full speed while the carrier is down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kestrel.protocol.events import Record

MAX_CARRIED = 256
"""Carried records a follower holds at most; past that it reads them from the log instead."""


class FollowedLog(Protocol):
    """What following needs of the event log."""

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """Every record of the session with `seq > after_seq`, in order."""
        ...

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The last record number of each of these sessions that has any."""
        ...


class Carrier(Protocol):
    """Brings records appended by any process to this one as they are logged."""

    async def mark(self, session_id: str) -> None:
        """Carry the session's records from now on: called before its log is first read."""
        ...

    def forget(self, session_id: str) -> None:
        """Nobody here follows the session any more."""
        ...

    async def run(
        self,
        sessions: Callable[[], Collection[str]],
        deliver: Callable[[str, list[Record]], None],
        health: Callable[[bool], None],
    ) -> None:
        """Deliver the new records of `sessions()` until cancelled, telling `health` whether
        the carrier works after each attempt; never raises for a carrier that went away."""
        ...

    async def close(self) -> None:
        """Release the carrier's connections."""
        ...


@dataclass(eq=False, slots=True)
class _Follower:
    """One stream's wake-up call and the records carried to it."""

    woken: asyncio.Event = field(default_factory=asyncio.Event)
    carried: list[Record] = field(default_factory=list)
    stale: bool = True
    """The log must be read: at the start, after a gap, an overflow or a poll's wake."""

    def wake(self, records: Sequence[Record] = ()) -> None:
        """Hand over carried `records`, or with none ask for a read of the log."""
        if not records or len(self.carried) + len(records) > MAX_CARRIED:
            self.carried.clear()
            self.stale = True
        else:
            self.carried.extend(records)
        self.woken.set()

    def drain(self, last: int) -> list[Record] | None:
        """The carried records that follow `last` without a gap; None when the log must be
        read instead."""
        records = [r for r in self.carried if r.seq > last]
        self.carried.clear()
        if self.stale:
            self.stale = False
            return None
        for expected, record in enumerate(records, start=last + 1):
            if record.seq != expected:
                return None
        return records


@dataclass(slots=True)
class Fanout:
    """Wakes the followers of sessions whose logs grew."""

    store: FollowedLog
    poll_s: float = 0.05
    carrier: Carrier | None = None
    carried_poll_s: float = 0.5
    """How often the log is polled while the carrier works."""
    _followers: dict[str, set[_Follower]] = field(default_factory=dict)
    _known: dict[str, int] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _carrier_up: bool = False
    _carrier_down: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the carrier goes down: the poll, waiting its slower interval, starts at once."""

    def start(self) -> None:
        """Start polling, and carrying (in the running event loop)."""
        self._tasks.append(asyncio.create_task(self._poll()))
        if self.carrier is not None:
            carrying = self.carrier.run(lambda: list(self._followers), self._deliver, self._health)
            self._tasks.append(asyncio.create_task(carrying))

    async def stop(self) -> None:
        """Stop polling and carrying."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if self.carrier is not None:
            await self.carrier.close()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def follow(self, session_id: str, after_seq: int) -> AsyncIterator[Record]:
        """The session's records after `after_seq`, then new ones as they are logged."""
        follower = _Follower()
        self._followers.setdefault(session_id, set()).add(follower)
        if self.carrier is not None:
            await self.carrier.mark(session_id)
        last = after_seq
        try:
            while True:
                follower.woken.clear()
                carried = follower.drain(last)
                batch = self.store.read(session_id, last) if carried is None else carried
                for record in batch:
                    yield record
                    last = record.seq
                if not batch:
                    await follower.woken.wait()
        finally:
            followers = self._followers.get(session_id, set())
            followers.discard(follower)
            if not followers:
                self._followers.pop(session_id, None)
                self._known.pop(session_id, None)
                if self.carrier is not None:
                    self.carrier.forget(session_id)

    def _deliver(self, session_id: str, records: list[Record]) -> None:
        if not records:
            return
        # The poll need not wake anyone for what was carried.
        self._known[session_id] = max(self._known.get(session_id, 0), records[-1].seq)
        for follower in self._followers.get(session_id, ()):
            follower.wake(records)

    def _health(self, up: bool) -> None:
        if up and not self._carrier_up:
            # Back after an outage (or up for the first time): what it missed is in the log.
            for followers in self._followers.values():
                for follower in followers:
                    follower.wake()
        if not up and self._carrier_up:
            self._carrier_down.set()
        self._carrier_up = up

    async def _poll(self) -> None:
        while True:
            interval = self.carried_poll_s if self._carrier_up else self.poll_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._carrier_down.wait(), interval)
            self._carrier_down.clear()
            followed = list(self._followers)
            if not followed:
                continue
            for session_id, seq in self.store.last_seqs(followed).items():
                if seq != self._known.get(session_id):
                    self._known[session_id] = seq
                    for follower in self._followers.get(session_id, ()):
                        follower.wake()


def carrier_from_env(env: Mapping[str, str]) -> Carrier | None:
    """The Redis carrier when `KESTREL_REDIS_URL` is set (keys under `KESTREL_REDIS_PREFIX`),
    else None: the fan-out then polls the log alone, as on one machine."""
    url = env.get("KESTREL_REDIS_URL", "").strip()
    if not url or url.lower() == "none":
        return None
    from kestrel.redis_link import DEFAULT_PREFIX, RedisLink
    from kestrel.service.events_redis import RedisCarrier

    return RedisCarrier(RedisLink(url, env.get("KESTREL_REDIS_PREFIX") or DEFAULT_PREFIX))
