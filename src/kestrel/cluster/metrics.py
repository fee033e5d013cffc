"""What the cluster is doing, in Prometheus' text format: the queue by tier, runs under way,
live workers, failovers, and this worker's own runs.

The cluster-wide figures are read from the database on each scrape (any process can serve
them, and every one serves the same); the per-process ones are counted where they happen. The
queue's figures read the engine's `workflow_status` table: the engine is pinned to one release
(see pyproject), the queries name its schema (`engine.SCHEMA`), and the metrics tests read
them back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kestrel.cluster.engine import QUEUE, TOP_PRIORITY
from kestrel.cluster.liveness import connect


def _prometheus() -> Any:
    import prometheus_client
    import prometheus_client.core

    return prometheus_client


class ClusterCollector:
    """Cluster-wide gauges, read from the database when scraped."""

    def __init__(self, url: str) -> None:
        self._url = url

    def collect(self) -> Iterator[Any]:
        """The gauges; none when the database does not answer (the scrape still succeeds)."""
        core = _prometheus().core
        try:
            with connect(self._url) as conn:
                queued, running = _runs(conn)
                alive, failovers = _counts(conn)
        except Exception:
            up = core.GaugeMetricFamily("kestrel_database_up", "Whether the database answered.")
            up.add_metric([], 0)
            yield up
            return
        up = core.GaugeMetricFamily("kestrel_database_up", "Whether the database answered.")
        up.add_metric([], 1)
        yield up
        depth = core.GaugeMetricFamily(
            "kestrel_queue_depth", "Session runs waiting for a worker.", labels=["tier"]
        )
        oldest = core.GaugeMetricFamily(
            "kestrel_queue_oldest_seconds",
            "How long the oldest waiting run waited.",
            labels=["tier"],
        )
        for tier, (count, waited) in sorted(queued.items()):
            depth.add_metric([str(tier)], count)
            oldest.add_metric([str(tier)], waited)
        yield depth
        yield oldest
        yield core.GaugeMetricFamily(
            "kestrel_runs_active", "Session runs under way.", value=running
        )
        yield core.GaugeMetricFamily("kestrel_workers_alive", "Workers beating.", value=alive)
        yield core.CounterMetricFamily(
            "kestrel_failovers", "Runs taken over from dead workers.", value=failovers
        )


def _runs(conn: Any) -> tuple[dict[int, tuple[int, float]], int]:
    """Waiting runs by tier (how many, how long the oldest waited) and the runs under way.

    One statement, so both come from one snapshot: read one after the other, a run claimed
    in between was counted both waiting and running.
    """
    rows = conn.execute(
        "SELECT status, priority, count(*), extract(epoch FROM now()) - min(created_at) / 1000.0"
        " FROM kestrel_dbos.workflow_status WHERE queue_name = %s"
        " AND status IN ('ENQUEUED', 'PENDING') GROUP BY status, priority",
        (QUEUE,),
    ).fetchall()
    queued = {TOP_PRIORITY - int(p): (int(n), float(w)) for s, p, n, w in rows if s == "ENQUEUED"}
    return queued, sum(int(n) for s, _, n, _ in rows if s == "PENDING")


def _counts(conn: Any) -> tuple[int, int]:
    alive = conn.execute("SELECT count(*) FROM kestrel_executors").fetchone()[0]
    failovers = conn.execute("SELECT coalesce(sum(runs), 0) FROM kestrel_failovers").fetchone()[0]
    return int(alive), int(failovers)


class WorkerMetrics:
    """This worker's own counters, with the cluster's gauges, in one registry to serve."""

    def __init__(self, url: str) -> None:
        prometheus = _prometheus()
        self.registry = prometheus.CollectorRegistry()
        self.registry.register(ClusterCollector(url))
        self.runs = prometheus.Counter(
            "kestrel_worker_runs", "Runs this worker started.", registry=self.registry
        )
        self.run_seconds = prometheus.Histogram(
            "kestrel_worker_run_seconds",
            "How long this worker's runs took, start to end.",
            buckets=(1, 5, 15, 60, 300, 900, 3600, float("inf")),
            registry=self.registry,
        )
        self.step_seconds = prometheus.Histogram(
            "kestrel_step_seconds",
            "How long the steps of this worker's sessions took: model calls and tool calls.",
            labelnames=["kind"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, float("inf")),
            registry=self.registry,
        )
        self.sandbox_starts = prometheus.Counter(
            "kestrel_sandbox_starts",
            "Commands this worker's sessions started, each in a sandbox of its own when it is on.",
            registry=self.registry,
        )
        self.takeovers = prometheus.Counter(
            "kestrel_worker_takeovers",
            "Runs this worker put back on the queue.",
            registry=self.registry,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve `/metrics` on `host:port` from a thread."""
        _prometheus().start_http_server(port, addr=host, registry=self.registry)


def text(url: str) -> bytes:
    """The cluster-wide gauges in the text format, for a server's `/metrics` route."""
    prometheus = _prometheus()
    registry = prometheus.CollectorRegistry()
    registry.register(ClusterCollector(url))
    data: bytes = prometheus.generate_latest(registry)
    return data
