"""What the fan-out tests share: a log that counts its reads, a writer that publishes, and a
follower that collects what it is given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.protocol.events import Record, SessionStarted, UserMessage
from kestrel.redis_link import RedisLink
from kestrel.service.events import Fanout
from kestrel.service.events_redis import RedisCarrier
from kestrel.store.redis_publish import Publisher, PublishingStore
from kestrel.store.sqlite import SQLiteStore

NEVER_S = 3600.0
"""A poll interval no test lives to see: what arrives came through Redis."""


@dataclass
class CountingLog:
    """The server's view of the log, counting how often the fan-out reads it."""

    inner: SQLiteStore
    reads: int = 0

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        self.reads += 1
        return self.inner.read(session_id, after_seq)

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        return self.inner.last_seqs(session_ids)


def writer(path: Path, link: RedisLink) -> PublishingStore:
    """A session's process: appends to the log and publishes to Redis."""
    return PublishingStore(SQLiteStore(path), Publisher(link))


def start(store: PublishingStore, session_id: str) -> None:
    store.append(session_id, SessionStarted(session_id=session_id, task="t", cwd="/", model="m"))


def say(store: PublishingStore | SQLiteStore, session_id: str, count: int) -> None:
    for n in range(count):
        store.append(session_id, UserMessage(text=f"message {n}"))


def carried_fanout(log: CountingLog, link: RedisLink, *, poll_s: float = NEVER_S) -> Fanout:
    """A fan-out that only Redis can wake (unless `poll_s` says otherwise while it is down)."""
    return Fanout(log, poll_s=poll_s, carrier=RedisCarrier(link), carried_poll_s=NEVER_S)


@dataclass
class Collector:
    """Follows one session and keeps the numbers of the records it gets."""

    fanout: Fanout
    session_id: str
    after: int = 0
    seqs: list[int] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def begin(self) -> Collector:
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for record in self.fanout.follow(self.session_id, self.after):
            self.seqs.append(record.seq)

    async def until(self, count: int, timeout_s: float = 10.0) -> list[int]:
        """Wait until `count` records arrived (or the time is up); the numbers seen."""
        async with asyncio.timeout(timeout_s):
            while len(self.seqs) < count:
                await asyncio.sleep(0.005)
        return self.seqs

    async def end(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
