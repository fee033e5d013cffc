"""Fixtures for the event store tests: each contract test runs against every implementation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_helpers import fresh_database
from psycopg.conninfo import conninfo_to_dict
from store_helpers import Clock
from tcp_proxy import Relay

from kestrel.store import EventStore, MemoryStore, SQLiteStore


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store of each kind, with a stepping clock; PostgreSQL in a database of its own."""
    if request.param == "postgres":
        from kestrel.store.postgres import PostgresStore

        with fresh_database() as url:
            made: EventStore = PostgresStore(url, clock=Clock())
            yield made
            made.close()
        return
    if request.param == "sqlite":
        made = SQLiteStore(tmp_path / "data" / "sessions.db", clock=Clock())
    else:
        made = MemoryStore(clock=Clock())
    yield made
    made.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database for this test alone."""
    with fresh_database() as url:
        yield url


@pytest.fixture
def relay(pg_url: str) -> Iterator[Relay]:
    """A relay in front of the test server, up."""
    parts = conninfo_to_dict(pg_url)
    host = str(parts.get("host") or "")
    if not host or host.startswith("/"):
        pytest.skip("the test server is reached over a unix socket; the relay needs TCP")
    made = Relay(host, int(parts.get("port") or 5432))
    made.up()
    yield made
    made.down()
