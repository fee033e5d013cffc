"""Fixtures for the event store tests: each contract test runs against every implementation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import Clock

from kestrel.store import EventStore, MemoryStore, SQLiteStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store of each kind, with a stepping clock."""
    made: EventStore
    if request.param == "sqlite":
        made = SQLiteStore(tmp_path / "data" / "sessions.db", clock=Clock())
    else:
        made = MemoryStore(clock=Clock())
    yield made
    made.close()
