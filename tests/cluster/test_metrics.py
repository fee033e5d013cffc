"""The cluster's Prometheus metrics, scraped from a real worker: the queue by tier, runs under
way, live workers, and failovers once a worker is killed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_kit import LocalCluster, ended, free_port, live_cluster, scrape, wait_for
from pg_helpers import fresh_database

from kestrel.cluster.engine import SCHEMA

pytest.importorskip("dbos")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with fresh_database() as url:
        yield from live_cluster(url, tmp_path)


def test_the_metrics_queries_name_the_engines_schema() -> None:
    assert SCHEMA == "kestrel_dbos"  # cluster/metrics.py reads kestrel_dbos.workflow_status.


def test_a_worker_serves_the_queue_by_tier_and_counts_failovers(cluster: LocalCluster) -> None:
    port = free_port()
    first = cluster.start_worker(slots=1)
    runs = [cluster.new_session(f"s{n}", 4, tier=n % 2) for n in range(4)]
    second = cluster.start_worker(slots=1, metrics_port=port)

    def busy() -> dict[str, float] | None:
        seen = scrape(port)
        return seen if seen.get("kestrel_runs_active") == 2 else None

    seen = wait_for(busy, 60, "both workers to run a session")
    assert seen["kestrel_database_up"] == 1
    assert seen["kestrel_workers_alive"] == 2
    assert sum(v for k, v in seen.items() if k.startswith("kestrel_queue_depth{")) == 2
    assert second.executor_id
    held = cluster.cluster.running_on(first.executor_id)
    first.kill()
    for _, run in runs:
        wait_for(lambda run=run: ended(cluster, run), 180, f"run {run} to end")
    after = scrape(port)
    assert after["kestrel_failovers_total"] == len(held) == 1
    assert after["kestrel_worker_takeovers_total"] == 1
    assert after["kestrel_workers_alive"] == 1
    assert after["kestrel_worker_runs_total"] >= 3
