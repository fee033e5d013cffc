"""How a cluster's server and workers hand a run over through the registry in PostgreSQL: a
worker claims only the run the registry holds (again after a takeover, never after a withdraw),
sets the session idle at the end, and leaves sessions no server hosts alone; a server withdraws
a queued run and stops a starting one through the log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_kit import fresh_database

from kestrel.cluster.runs import REGISTRY, registry_begin, registry_end
from kestrel.protocol.events import CancelRequested, SessionFinished, SessionStarted
from kestrel.server.registry import TABLE, Hosted, Registry
from kestrel.server.sql_pg import SCHEMA
from kestrel.service.decisions import NotRunning, request_cancel

pytest.importorskip("dbos")


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_database() as made:
        yield made


def _hosted(session_id: str, status: str, run_id: str | None) -> Hosted:
    return Hosted(
        session_id=session_id,
        tenant_id="acme",
        user_id="u1",
        tier=1,
        checkout=Path("/srv/checkouts") / session_id,
        status=status,  # type: ignore[arg-type]
        next_message="go on",
        created_at=time.time(),
        run_id=run_id,
    )


def _registry(url: str) -> Registry:
    from kestrel.server.sql_pg import PostgresDatabase

    return Registry(PostgresDatabase(url))


def test_the_worker_names_the_servers_table() -> None:
    assert f"{SCHEMA}.{TABLE}" == REGISTRY


def test_a_worker_claims_only_the_run_the_registry_holds(url: str) -> None:
    assert registry_begin(url, "s1", "s1:4-aa") is None  # No server has made its tables.
    registry = _registry(url)
    registry.add(_hosted("s1", "queued", "s1:4-aa"))

    assert registry_begin(url, "s9", "s9:1-bb") is None  # Not hosted: run as asked.
    assert registry_begin(url, "s1", "s1:4-old") is False  # Another run since: not run.
    assert registry_begin(url, "s1", "s1:4-aa") is True
    assert registry_begin(url, "s1", "s1:4-aa") is True  # Taken over from a dead worker.
    running = registry.find("s1")
    assert running is not None and running.status == "running"
    assert running.next_message == "go on"  # Kept for a run taken over.

    registry_end(url, "s1", "s1:4-old")  # Not this run's to end.
    assert registry.counts("acme") == (1, 0)
    registry_end(url, "s1", "s1:4-aa")
    idle = registry.find("s1")
    assert idle is not None and (idle.status, idle.next_message) == ("idle", None)
    assert registry_begin(url, "s1", "s1:4-aa") is False  # Ended: a late retry does not run.
    registry.close()


def test_a_server_withdraws_a_queued_run_and_stops_a_starting_one(url: str) -> None:
    from kestrel.cluster.submit import Cluster
    from kestrel.server.cluster_mode import ClusterRuns
    from kestrel.store.postgres import PostgresStore

    store = PostgresStore(url)
    registry = _registry(url)
    runs = ClusterRuns(registry, store, Cluster(url))
    registry.add(_hosted("s1", "queued", "s1:0-aa"))
    assert asyncio.run(runs.withdraw("s1"))  # The queue has no such run: said, not raised.
    assert registry.find("s1").status == "idle"  # type: ignore[union-attr]
    assert registry_begin(url, "s1", "s1:0-aa") is False  # A worker handed it runs nothing.
    assert not asyncio.run(runs.withdraw("s1"))

    started = SessionStarted(session_id="s2", task="t", cwd="/srv", model="scripted:m")
    store.append("s2", started)
    store.append("s2", SessionFinished(reason="done"))
    registry.add(_hosted("s2", "running", "s2:2-bb"))
    with pytest.raises(NotRunning):
        request_cancel(store, "s2", by="api:u1")  # Its log says finished: the new run has not
    assert asyncio.run(runs.terminate("s2"))  # logged its start, and watches from seq 2 on.
    last = store.read("s2")[-1].event
    assert isinstance(last, CancelRequested)
    assert not asyncio.run(runs.terminate("s1"))  # Idle: nothing to stop.
    asyncio.run(runs.stop())
    store.close()
    registry.close()
