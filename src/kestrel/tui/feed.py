"""Reading a session's log as it grows, in batches.

The view reads the log itself every `POLL_S` rather than waiting on the store's wake-ups: a
batch of streamed pieces then becomes one redraw, and a reader is stopped by cancelling a plain
sleep, which never loses the cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from kestrel.protocol.events import Record
from kestrel.store.base import EventStore

POLL_S = 0.05


async def batches(
    store: EventStore, session_id: str, after_seq: int, poll_s: float = POLL_S
) -> AsyncIterator[Sequence[Record]]:
    """The session's records after `after_seq`, a batch at a time, then new ones as logged."""
    last = after_seq
    while True:
        batch = store.read(session_id, last)
        if batch:
            last = batch[-1].seq
            yield batch
        else:
            await asyncio.sleep(poll_s)
