"""A stop asked for from another process (`kestrel cancel`, the service) ends the run here as
Ctrl-C would: the running call is rolled back and the session is recorded as cancelled."""

from __future__ import annotations

import signal
from collections.abc import Callable

from kestrel.cli import interrupts
from kestrel.protocol.events import CancelRequested
from kestrel.store.base import EventStore


async def watch_for_cancel(
    store: EventStore, session_id: str, after_seq: int, cancel: Callable[[str], object]
) -> None:
    """Wait for a `cancel_requested` after `after_seq`, then call `cancel(why)` once."""
    feed = store.subscribe(session_id, after_seq)
    try:
        async for record in feed:
            event = record.event
            if isinstance(event, CancelRequested):
                interrupts.note(signal.SIGINT)
                who = event.by or "another process"
                cancel(f"{interrupts.CANCEL_DETAIL} ({who})")
                return
    finally:
        close = getattr(feed, "aclose", None)
        if close is not None:
            await close()
