"""The database away for 10 s mid-run: workers and sessions pause, then every session goes on
and finishes with nothing lost or written twice, and no live worker is taken for dead."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_kit import LocalCluster, check_session, ended, live_cluster, wait_for
from pg_helpers import fresh_database
from psycopg.conninfo import conninfo_to_dict
from tcp_proxy import Relay

from kestrel.protocol.events import ToolFinished

pytest.importorskip("dbos")

STEPS = 8


@pytest.fixture
def relayed(tmp_path: Path) -> Iterator[tuple[LocalCluster, Relay]]:
    """A cluster whose every connection to the database goes through a relay the test cuts."""
    with fresh_database() as url:
        parts = conninfo_to_dict(url)
        host = str(parts.get("host") or "")
        if not host or host.startswith("/"):
            pytest.skip("the test server is reached over a unix socket; the relay needs TCP")
        relay = Relay(host, int(parts.get("port") or 5432))
        relay.up()
        via = f"postgresql://{parts.get('user', '')}@127.0.0.1:{relay.port}/{parts['dbname']}"
        try:
            yield from ((cluster, relay) for cluster in live_cluster(via, tmp_path))
        finally:
            relay.down()


def test_sessions_pause_through_a_database_outage_and_finish(
    relayed: tuple[LocalCluster, Relay],
) -> None:
    cluster, relay = relayed
    workers = [cluster.start_worker() for _ in range(2)]
    runs = [cluster.new_session(f"s{n}", STEPS) for n in range(3)]

    def under_way() -> bool:
        return all(
            sum(isinstance(r.event, ToolFinished) for r in cluster.records(s)) >= 2 for s, _ in runs
        )

    wait_for(under_way, 120, "every session to be under way")
    relay.down()
    time.sleep(10)
    relay.up()
    back = time.time()
    for _, run in runs:
        wait_for(lambda run=run: ended(cluster, run), 180, f"run {run} to end")
    for session_id, _ in runs:
        records = check_session(cluster, session_id, STEPS)
        assert any(r.at > back for r in records), "a session finished before the outage"
    for worker in workers:
        assert worker.proc.poll() is None, worker.said.read_text()[-2000:]
        assert "taken for dead" not in worker.said.read_text()
