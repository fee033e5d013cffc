"""Workers killed mid-session: other workers take their sessions over and finish them, with the
result of an uninterrupted run, every logged model call and tool result exactly once, and no
gap or duplicate in any log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_kit import LocalCluster, chaos, check_session, ended, live_cluster, wait_for
from pg_helpers import fresh_database

from kestrel.protocol.events import CheckpointCreated, Record, ToolFinished

pytest.importorskip("dbos")

STEPS = 6


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with fresh_database() as url:
        yield from live_cluster(url, tmp_path)


def test_a_killed_workers_session_finishes_on_another(cluster: LocalCluster) -> None:
    first = cluster.start_worker()
    cluster.start_worker()
    runs = [cluster.new_session(f"s{n}", STEPS) for n in range(3)]

    def mid_session_on_first() -> tuple[str, str] | None:
        for session_id, run in runs:
            state = cluster.cluster.state(run)
            if state and state.status == "PENDING" and state.executor_id == first.executor_id:
                logged = cluster.records(session_id)
                if sum(isinstance(r.event, ToolFinished) for r in logged) >= 2:
                    return session_id, run
        return None

    session_id, run = wait_for(mid_session_on_first, 90, "the first worker to be mid-session")
    first.kill()
    killed_at = time.time()
    for _, each in runs:
        wait_for(lambda each=each: ended(cluster, each), 120, f"run {each} to end")
    taken = cluster.cluster.state(run)
    assert taken is not None and taken.status == "SUCCESS"
    assert taken.executor_id != first.executor_id
    for each, _ in runs:
        check_session(cluster, each, STEPS)
    after = [r.at for r in cluster.records(session_id) if r.at > killed_at]
    assert after, "the session taken over logged nothing after the kill"


def test_sessions_survive_workers_killed_again_and_again(cluster: LocalCluster) -> None:
    for _ in range(3):
        cluster.start_worker()
    report = chaos(cluster, sessions=4, kills=3, every_s=2.5, steps=STEPS, seed=7)
    assert report.kills >= 1  # How many land before every run ends depends on the machine.


@pytest.fixture
def apart(tmp_path: Path) -> Iterator[LocalCluster]:
    """Workers with a data folder each, as on machines of their own, sharing checkpoints."""
    with fresh_database() as url:
        for cluster in live_cluster(url, tmp_path):
            cluster.share_url = (tmp_path / "shared").as_uri()
            yield cluster


def test_a_worker_without_the_sessions_files_makes_them_from_shared_checkpoints(
    apart: LocalCluster,
) -> None:
    """The worker that takes a session over has none of its overlay or checkpoints, and makes
    its files from the newest checkpoint in shared storage (a later edit fails if a file is not
    as the log says, and the final file shows it)."""
    first = apart.start_worker(slots=1)
    session_id, run = apart.new_session("own", STEPS)

    def edited_on_first() -> bool:
        state = apart.cluster.state(run)
        logged = apart.records(session_id)
        return (
            state is not None
            and state.executor_id == first.executor_id
            and sum(isinstance(r.event, ToolFinished) for r in logged) >= 3
        )

    wait_for(edited_on_first, 90, "the first worker to have edited")
    first.kill()
    second = apart.start_worker(slots=1)
    wait_for(lambda: ended(apart, run), 120, "the run to end on the second worker")
    state = apart.cluster.state(run)
    assert state is not None and state.status == "SUCCESS"
    assert state.executor_id == second.executor_id
    check_session(apart, session_id, STEPS)
    labels = [r.event.label for r in apart.records(session_id) if _checkpoint(r)]
    assert "a new overlay of the checkout" not in labels  # Not taken for a new start.
    bundles = list((apart.root / "shared" / "workspaces" / session_id).iterdir())
    assert len(bundles) >= STEPS, bundles  # The baseline and one per edit, at least.


def _checkpoint(record: Record) -> bool:
    return isinstance(record.event, CheckpointCreated)
