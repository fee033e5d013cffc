"""The event store sums model spend by time and by session, without replaying the logs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from cost_kit import Clock

from kestrel.protocol.events import ModelCompleted, SessionStarted, UserMessage
from kestrel.protocol.messages import AssistantTurn, Usage
from kestrel.store import MemoryStore, SQLiteStore
from kestrel.store.base import EventStore, Spend
from kestrel.store.sqlite_queries import SPENT_SINCE


@pytest.fixture
def clock() -> Clock:
    return Clock(1_000.0)


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[EventStore]:
    made: EventStore
    if request.param == "sqlite":
        made = SQLiteStore(tmp_path / "sessions.db", clock=clock)
    else:
        made = MemoryStore(clock=clock)
    yield made
    made.close()


def completed(cost: float, *, fresh: int = 10, cached: int = 0, out: int = 5) -> ModelCompleted:
    usage = Usage(
        model="m", input_tokens=fresh, cache_read_tokens=cached, output_tokens=out, cost_usd=cost
    )
    return ModelCompleted(request_id="r", message=AssistantTurn(text="ok"), usage=usage)


def begin(store: EventStore, session_id: str) -> None:
    store.append(session_id, SessionStarted(session_id=session_id, task="t", cwd="/", model="m"))


def test_spent_since_sums_every_session_from_a_moment_on(store: EventStore, clock: Clock) -> None:
    begin(store, "a")
    begin(store, "b")
    store.append("a", completed(0.5, fresh=100))  # Before the cut: not counted.
    clock.now = 2_000.0
    store.append("a", completed(0.25, fresh=10, cached=30, out=5))
    store.append("b", UserMessage(text="not a model call"))
    store.append("b", completed(0.125, fresh=1, out=2))
    assert store.spent_since(2_000.0) == Spend(cost_usd=0.375, tokens=48, calls=2)
    assert store.spent_since(0.0).cost_usd == pytest.approx(0.875)
    assert store.spent_since(3_000.0) == Spend()


def test_each_session_summary_carries_its_cost(store: EventStore) -> None:
    begin(store, "a")
    begin(store, "b")
    store.append("a", completed(0.5))
    store.append("a", completed(0.25))
    costs = {s.session_id: s.cost_usd for s in store.sessions()}
    assert costs == {"a": 0.75, "b": 0.0}


def test_an_older_store_gets_the_spend_indexes_and_uses_them(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX events_usage_by_time")
    conn.execute("DROP INDEX events_usage_by_session")
    # As a store an older Kestrel opened has them: indexes over turns only.
    conn.execute("CREATE INDEX events_spend_by_time ON events (at) WHERE type = 'model_completed'")
    conn.close()
    with SQLiteStore(path) as store:
        begin(store, "a")
        store.append("a", completed(0.5))
        assert store.spent_since(0.0).calls == 1
    conn = sqlite3.connect(path)
    try:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {SPENT_SINCE}", (0.0,)).fetchall()
        assert "events_usage_by_time" in str(plan)
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "events_spend_by_time" not in names
    finally:
        conn.close()
