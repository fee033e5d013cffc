"""Live events for many followers from one poll: a stream per follower, one query for all.

A session's events are appended by its own process, so the server learns of them by polling
the log. Polling once per client would cost a query per client every 50 ms; instead one task asks
the log for the last event number of every followed session, and wakes only the streams whose
session moved on. Each stream then reads its new events from the durable log, so a slow client
only falls behind and holds nothing in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kestrel.protocol.events import Record
from kestrel.store.sqlite import SQLiteStore


@dataclass(slots=True)
class Fanout:
    """Wakes the followers of sessions whose logs grew."""

    store: SQLiteStore
    poll_s: float = 0.05
    _waiters: dict[str, set[asyncio.Event]] = field(default_factory=dict)
    _known: dict[str, int] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start polling (in the running event loop)."""
        self._task = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def follow(self, session_id: str, after_seq: int) -> AsyncIterator[Record]:
        """The session's records after `after_seq`, then new ones as they are logged."""
        woken = asyncio.Event()
        self._waiters.setdefault(session_id, set()).add(woken)
        last = after_seq
        try:
            while True:
                woken.clear()
                batch = self.store.read(session_id, last)
                for record in batch:
                    yield record
                    last = record.seq
                if not batch:
                    await woken.wait()
        finally:
            waiters = self._waiters.get(session_id, set())
            waiters.discard(woken)
            if not waiters:
                self._waiters.pop(session_id, None)
                self._known.pop(session_id, None)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            followed = list(self._waiters)
            if not followed:
                continue
            for session_id, seq in self.store.last_seqs(followed).items():
                if seq != self._known.get(session_id):
                    self._known[session_id] = seq
                    for woken in self._waiters.get(session_id, ()):
                        woken.set()
