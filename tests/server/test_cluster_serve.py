"""Cluster mode end to end: two `kestrel serve` processes and two `kestrel worker` processes on
one PostgreSQL database. A session created through server A runs on a worker, a client of
server B sees every event and gets the rest after reconnecting with the last event id, answers
and stops given through either server reach it, another tenant gets 404 on both, and a server
whose database is away answers 503 and is not ready until it is back."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from pg_kit import Relay, fresh_database
from serve_cluster_kit import ServeCluster, approve_all, read_sse
from server_kit import BASH_THEN_DONE, wait_for

pytest.importorskip("dbos")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeCluster]:
    """The servers start before any worker: the first session waits, queued, for one."""
    from psycopg.conninfo import conninfo_to_dict

    with fresh_database() as url:
        parts = conninfo_to_dict(url)
        relay = Relay(str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432))
        relay.up()
        running = ServeCluster(url, tmp_path_factory.mktemp("cluster"), relay)
        try:
            running.start_servers()
            yield running
        finally:
            running.stop()
            relay.down()


def _session(cluster: ServeCluster, client: httpx.Client, name: str, turns: list) -> str:
    a = cluster.servers[0]
    body = {"task": "make a file", "source": {"path": str(a.repo(name))}}
    body["model"] = a.script(turns, f"{name}.json")
    made = client.post("/sessions", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def test_a_session_made_on_a_runs_on_a_worker_and_b_streams_all_of_it(
    cluster: ServeCluster,
) -> None:
    a, b = cluster.servers
    token = a.token("acme")
    on_a, on_b = a.client(token), b.client(token)
    sid = _session(cluster, on_a, "first", BASH_THEN_DONE)
    assert on_b.get(f"/sessions/{sid}").json()["status"] == "queued"
    assert on_b.get("/queue").json()["workers"] == 0  # No worker has started yet.
    cluster.start_worker()  # The queue's tables exist from now on: the run is queued again.
    cluster.start_worker()
    assert on_a.get("/queue").json()["workers"] == 2  # The cluster's live workers.

    over = threading.Event()
    answering = threading.Thread(target=approve_all, args=(on_a, sid, over.is_set))
    answering.start()
    try:
        streamed = read_sse(on_b, sid, {}, _finished_and_idle)
    finally:
        over.set()
        answering.join()
    logged = [r["seq"] for r in on_a.get(f"/sessions/{sid}/events").json()]
    seen = [int(seq) for seq, _ in streamed if seq != "status"]
    assert seen == logged == list(range(1, len(logged) + 1))  # Every event, once, in order.
    assert ("status", "running") in streamed

    half = len(logged) // 2
    rest = read_sse(
        on_b, sid, {"Last-Event-ID": str(half)}, lambda got: _ids(got)[-1:] == [seen[-1]]
    )
    assert _ids(rest) == logged[half:]  # After reconnecting: the rest, nothing lost or twice.

    runs = cluster.executors_of(sid)
    assert runs and all(status == "SUCCESS" and executor for status, executor in runs), runs
    shown = on_a.get(f"/sessions/{sid}").json()
    assert (shown["status"], shown["finished"]) == ("idle", "done")
    assert "+hi" in on_b.get(f"/sessions/{sid}/diff").text  # B runs `kestrel diff` on the log.

    stranger = b.client(b.token("globex"))
    assert stranger.get(f"/sessions/{sid}").status_code == 404
    assert stranger.get(f"/sessions/{sid}/events").status_code == 404
    assert stranger.post(f"/sessions/{sid}/cancel").status_code == 404
    assert sid not in [s["id"] for s in stranger.get("/sessions").json()]
    scraped = httpx.get(b.url + "/metrics")  # A scraper on the same machine: no token.
    assert scraped.status_code == 200 and "kestrel_workers_alive 2.0" in scraped.text


def test_a_queued_run_is_withdrawn_and_a_running_one_stopped_from_the_other_server(
    cluster: ServeCluster,
) -> None:
    a, b = cluster.servers
    token = a.token("initech")
    on_a, on_b = a.client(token), b.client(token)
    while len(cluster.workers) < 2:
        cluster.start_worker()
    first = _session(cluster, on_a, "waits", BASH_THEN_DONE)
    wait_for(on_b, first, lambda v: v["waiting_on"] == "approval")
    # One run per tenant at once on these workers: the second waits on the queue.
    second = _session(cluster, on_a, "queued", BASH_THEN_DONE)
    logged = len(on_a.get(f"/sessions/{second}/events").json())
    assert on_b.get(f"/sessions/{second}").json()["status"] == "queued"

    assert on_b.post(f"/sessions/{second}/cancel").status_code == 202
    assert on_a.get(f"/sessions/{second}").json()["status"] == "idle"
    cancelled = [status for status, _ in cluster.executors_of(second)]
    assert cancelled == ["CANCELLED"], cancelled

    assert on_b.post(f"/sessions/{first}/cancel").status_code == 202
    stopped = wait_for(on_a, first, lambda v: v["status"] == "idle")
    assert stopped["finished"] == "cancelled"
    assert len(on_a.get(f"/sessions/{second}/events").json()) == logged  # It never ran.

    assert on_a.post(f"/sessions/{second}/resume").status_code == 202  # A new run, not the old.
    wait_for(on_b, second, lambda v: v["waiting_on"] == "approval")
    assert on_a.post(f"/sessions/{second}/cancel").status_code == 202
    assert wait_for(on_b, second, lambda v: v["status"] == "idle")["finished"] == "cancelled"


def test_a_server_without_its_database_answers_503_and_is_not_ready(
    cluster: ServeCluster,
) -> None:
    a, b = cluster.servers
    token = b.token("umbrella")
    on_a = a.client(token)
    assert httpx.get(a.url + "/readyz").status_code == 200
    cluster.relay.down()
    try:
        answer = on_a.get("/sessions")
        assert answer.status_code == 503
        assert answer.json()["error"]["message"] == (
            "the server cannot do this now: its database cannot be reached; try again later"
        )
        assert answer.headers["Retry-After"] == "5"
        assert httpx.get(a.url + "/readyz").status_code == 503
        assert httpx.get(a.url + "/healthz").status_code == 200  # Alive: not restarted for it.
        assert httpx.get(b.url + "/readyz").status_code == 200  # B reaches it directly.
        assert b.client(token).get("/sessions").status_code == 200
    finally:
        cluster.relay.up()
    assert on_a.get("/sessions").status_code == 200
    assert httpx.get(a.url + "/readyz").json() == {"status": "ready"}


def _ids(items: list) -> list[int]:
    return [int(seq) for seq, _ in items if seq != "status"]


def _finished_and_idle(items: list) -> bool:
    kinds = [kind for seq, kind in items if seq != "status"]
    return "session_finished" in kinds and items[-1] == ("status", "idle")
