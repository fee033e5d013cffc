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
    # The steps of the runs it ran, read from their logs: each run reads a file and edits it.
    assert after['kestrel_step_seconds_count{kind="tool"}'] >= 3
    assert after['kestrel_step_seconds_count{kind="model"}'] >= 3
    assert after["kestrel_sandbox_starts_total"] == 0  # The scripted task runs no command.


def test_a_runs_steps_and_commands_are_counted_once(tmp_path: Path) -> None:
    from kestrel.cluster.metrics import WorkerMetrics
    from kestrel.cluster.step_watch import StepWatch
    from kestrel.protocol.events import (
        ModelCompleted,
        ModelRequestStarted,
        SessionStarted,
        ToolFinished,
    )
    from kestrel.protocol.messages import AssistantTurn, Usage
    from kestrel.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "log.db")
    events = [
        SessionStarted(session_id="s1", task="t", cwd="/", model="m"),
        ModelRequestStarted(request_id="r1", model="m", turn=1),
        ModelCompleted(request_id="r1", message=AssistantTurn(text="x"), usage=Usage(model="m")),
        ToolFinished(call_id="c1", name="bash", content="", exit_code=0, duration_ms=250),
        ToolFinished(call_id="c2", name="bash", content="denied", is_error=True),
        ToolFinished(call_id="c3", name="read_file", content="", duration_ms=2),
    ]
    for event in events:
        store.append("s1", event)
    metrics = WorkerMetrics("postgresql://unused")
    watch = StepWatch(lambda: SQLiteStore(tmp_path / "log.db"), "s1", 0, metrics).start()
    watch.stop()
    again = StepWatch(
        lambda: SQLiteStore(tmp_path / "log.db"), "s1", 6, metrics
    ).start()  # From the run's mark on.
    again.stop()
    assert metrics.sandbox_starts._value.get() == 1  # The denied command never started.
    samples = {
        (s.name, tuple(s.labels.items())): s.value
        for family in metrics.step_seconds.collect()
        for s in family.samples
    }
    assert samples[("kestrel_step_seconds_count", (("kind", "tool"),))] == 3
    assert samples[("kestrel_step_seconds_count", (("kind", "model"),))] == 1


def test_a_servers_metrics_route_answers_the_operator_only(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from kestrel.server.routes_metrics import TOKEN_ENV, add_metrics

    cluster.start_worker(slots=1)
    api, local = FastAPI(), FastAPI()
    add_metrics(api, cluster.url)
    add_metrics(local, None)  # A server on one machine has no cluster to report.
    monkeypatch.setenv(TOKEN_ENV, "s3cret")
    client = TestClient(api)  # Its requests come from "testclient": not loopback.
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 404
    answer = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert answer.status_code == 200, answer.text
    assert "kestrel_workers_alive 1.0" in answer.text
    assert "kestrel_queue_depth" in answer.text
    assert (
        TestClient(local).get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code
        == 404
    )
