"""A reader of a session's log stops when it is cancelled, even when the cancel lands at the
moment an append wakes it (Python 3.11's `asyncio.wait_for` could swallow that cancel, and the
reader then polled forever)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_helpers import fresh_database
from store_helpers import started

from kestrel.protocol.events import UserMessage
from kestrel.store.postgres import PostgresStore
from kestrel.store.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteStore | PostgresStore]:
    """A store whose readers poll and are woken: SQLite, or PostgreSQL in a database of its own."""
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "sessions.db") as made:
            yield made
        return
    with fresh_database() as url, PostgresStore(url) as pg:
        yield pg


async def _read_all(store: SQLiteStore | PostgresStore, session_id: str, after: int) -> None:
    async for _ in store.subscribe(session_id, after):
        pass


async def test_a_reader_cancelled_as_an_append_wakes_it_stops(
    store: SQLiteStore | PostgresStore,
) -> None:
    store.append("s", started("s"))
    for round_ in range(200):
        last = store.last_seqs(["s"])["s"]
        reader = asyncio.create_task(_read_all(store, "s", last))
        await asyncio.sleep(0)  # the reader is waiting now
        store.append("s", UserMessage(text=f"wake {round_}"))  # sets its flag...
        reader.cancel()  # ...and the cancel comes in the same tick
        done, _ = await asyncio.wait({reader}, timeout=10)
        assert done, f"round {round_}: a cancelled reader went on reading"
