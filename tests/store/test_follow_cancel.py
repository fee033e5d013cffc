"""A reader of a session's log stops when it is cancelled, even when the cancel lands at the
moment an append wakes it (Python 3.11's `asyncio.wait_for` could swallow that cancel, and the
reader then polled forever)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from store_helpers import started

from kestrel.protocol.events import UserMessage
from kestrel.store.sqlite import SQLiteStore


async def _read_all(store: SQLiteStore, session_id: str, after: int) -> None:
    async for _ in store.subscribe(session_id, after):
        pass


async def test_a_reader_cancelled_as_an_append_wakes_it_stops(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        store.append("s", started("s"))
        for round_ in range(200):
            last = store.last_seqs(["s"])["s"]
            reader = asyncio.create_task(_read_all(store, "s", last))
            await asyncio.sleep(0)  # the reader is waiting now
            store.append("s", UserMessage(text=f"wake {round_}"))  # sets its flag...
            reader.cancel()  # ...and the cancel comes in the same tick
            done, _ = await asyncio.wait({reader}, timeout=10)
            assert done, f"round {round_}: a cancelled reader went on reading"
    finally:
        store.close()
