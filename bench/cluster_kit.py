"""A cluster on this machine, for the tests and the benchmarks: workers as real processes sharing
a PostgreSQL database and a data directory, scripted sessions put on the queue as a server would,
and chaos (random workers killed and restarted) with the checks that nothing was lost."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.cluster.runs import RunRequest
from kestrel.cluster.submit import Cluster, session_of
from kestrel.protocol.events import (
    ModelCompleted,
    Record,
    SessionFinished,
    SessionStarted,
    ToolFinished,
)
from kestrel.service.sessions import NewSession, create_session, settings_for
from kestrel.store.postgres import PostgresStore

SLOW_TURN_S = 0.6
"""How long each scripted model turn takes: long enough that a kill lands mid-session."""


def script(steps: int) -> list[dict[str, Any]]:
    """A scripted task: read a file, change it `steps` times (one edit per turn), answer."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "count.py"}}]}
    ]
    for n in range(steps):
        edit = {"path": "count.py", "old_str": f"COUNT = {n}\n", "new_str": f"COUNT = {n + 1}\n"}
        turns.append(
            {"text": f"Step {n + 1}.", "tool_calls": [{"name": "edit_file", "arguments": edit}]}
        )
    turns.append({"text": f"COUNT is {steps} now."})
    return [{**turn, "delay_s": SLOW_TURN_S} for turn in turns]


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass
class Worker:
    """A `kestrel worker` process."""

    proc: subprocess.Popen[bytes]
    said: Path

    @property
    def executor_id(self) -> str:
        """Its id, from its ready line."""
        for line in self.said.read_text(errors="replace").splitlines():
            if line.startswith("kestrel worker ") and ": ready" in line:
                return line.split()[2].rstrip(":")
        return ""

    def kill(self) -> None:
        """SIGKILL, as a machine that dies would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@dataclass
class LocalCluster:
    """A database, a data directory shared by every worker, and the workers."""

    url: str
    root: Path
    workers: list[Worker] = field(default_factory=list)
    slots: int = 2
    share_url: str | None = None
    """Where checkpoints are shared; set, each worker has a data folder of its own, as on
    machines of their own (the checkouts stay at the same paths)."""

    def __post_init__(self) -> None:
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.root / "home"),
            "KESTREL_STORE_URL": self.url,
            "KESTREL_DATA_DIR": str(self.root / "data"),
            "PYTHONUNBUFFERED": "1",
        }
        self.cluster = Cluster(self.url)

    def start_worker(self, slots: int | None = None, metrics_port: int | None = None) -> Worker:
        """Start a worker and wait until it takes work (`slots`: as the last one started)."""
        self.slots = slots = slots or self.slots
        more = ["--metrics-port", str(metrics_port)] if metrics_port else []
        said = self.root / f"worker-{len(self.workers)}.log"
        env = dict(self.env)
        if self.share_url is not None:
            own = self.root / f"data-{len(self.workers)}"
            env.update(KESTREL_DATA_DIR=str(own), KESTREL_WORKSPACE_SHARE_URL=self.share_url)
        with said.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kestrel", "worker", "--slots", str(slots), *more],
                env=env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        worker = Worker(proc, said)
        self.workers.append(worker)
        wait_for(lambda: worker.executor_id or proc.poll() is not None, 60, "a worker to start")
        assert proc.poll() is None, said.read_text()
        return worker

    def settings(self, checkout: Path, model: str) -> Any:
        """The settings a session in `checkout` runs with."""
        saved = dict(os.environ)
        os.environ.update(self.env)
        try:
            return settings_for(checkout, {"model": model, "permission_mode": "accept-edits"})
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def new_session(
        self, name: str, steps: int, tenant: str = "t1", tier: int = 0
    ) -> tuple[str, str]:
        """A checkout with a scripted task, its session created and queued; (session, run)."""
        checkout = self.root / "checkouts" / name
        checkout.mkdir(parents=True)
        (checkout / "count.py").write_text("COUNT = 0\n")
        subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
        subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
            cwd=checkout,
            check=True,
        )
        script_path = self.root / "scripts" / f"{name}.json"
        script_path.parent.mkdir(exist_ok=True)
        script_path.write_text(json.dumps(script(steps)))
        settings = self.settings(checkout, f"scripted:{script_path}")
        with self.store(settings) as store:
            session_id = create_session(store, settings, NewSession(task="count up", cwd=checkout))
            mark = store.read(session_id)[-1].seq
        run = RunRequest(session_id=session_id, tenant=tenant, checkout=str(checkout), mark=mark)
        return session_id, self.cluster.submit(run, tier=tier)

    def store(self, settings: Any = None) -> Any:
        """The cluster's event log, closed after use."""
        return closing(PostgresStore(self.url))

    def records(self, session_id: str) -> list[Record]:
        """The session's whole log."""
        with self.store() as log:
            return list(log.read(session_id))

    def stop(self) -> None:
        """Kill every worker and let go of the queue."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.kill()
        self.cluster.close()


def live_cluster(url: str, root: Path) -> Iterator[LocalCluster]:
    """A cluster on `url` under `root`, stopped afterwards."""
    cluster = LocalCluster(url, root)
    try:
        yield cluster
    finally:
        cluster.stop()


def check_session(cluster: LocalCluster, session_id: str, steps: int) -> list[Record]:
    """Assert the session finished with the uninterrupted run's result, every model call and
    tool result logged exactly once and the log gap-free; its records."""
    records = cluster.records(session_id)
    assert [r.seq for r in records] == list(range(1, len(records) + 1)), "a gap in the log"
    ends = [r.event for r in records if isinstance(r.event, SessionFinished)]
    assert [e.reason for e in ends][-1:] == ["done"], ends
    results = Counter(r.event.call_id for r in records if isinstance(r.event, ToolFinished))
    assert set(results.values()) == {1}, f"a tool result logged twice: {results}"
    calls = sum(isinstance(r.event, ModelCompleted) for r in records)
    assert calls == steps + 2, f"{calls} model calls logged, the script has {steps + 2}"
    start = records[0].event
    assert isinstance(start, SessionStarted)
    checkout = Path(start.cwd)
    assert (checkout / "count.py").read_text() == f"COUNT = {steps}\n"
    return records


@dataclass
class ChaosReport:
    """What a chaos run did and measured."""

    sessions: int
    kills: int
    seconds: float
    failovers: list[float]
    """Per run a killed worker held: seconds from the kill to its session's next event."""


def chaos(
    cluster: LocalCluster,
    *,
    sessions: int,
    kills: int,
    every_s: float,
    steps: int,
    seed: int = 0,
    timeout_s: float = 900,
) -> ChaosReport:
    """Queue `sessions` scripted sessions over three tenants, then every `every_s` SIGKILL a
    random worker and start a new one in its place, `kills` times or until all runs ended;
    check every session (`check_session`)."""
    rng = random.Random(seed)
    started = time.monotonic()
    runs = [cluster.new_session(f"c{n}", steps, tenant=f"t{n % 3}") for n in range(sessions)]
    watched: list[tuple[float, str, int]] = []
    killed = 0
    deadline = started + timeout_s
    while not all(ended(cluster, run) for _, run in runs):
        assert time.monotonic() < deadline, "the chaos run did not finish in time"
        time.sleep(every_s)
        if killed >= kills:
            continue
        victim = rng.choice([w for w in cluster.workers if w.proc.poll() is None])
        held = [session_of(w) for w in cluster.cluster.running_on(victim.executor_id)]
        last = {s: cluster.records(s)[-1].seq for s in held}
        victim.kill()
        watched += [(time.time(), s, seq) for s, seq in last.items()]
        killed += 1
        cluster.start_worker(cluster.slots)
    for session_id, _ in runs:
        check_session(cluster, session_id, steps)
    return ChaosReport(sessions, killed, time.monotonic() - started, _failovers(cluster, watched))


def ended(cluster: LocalCluster, run: str) -> bool:
    """Whether the run has ended, well or not."""
    state = cluster.cluster.state(run)
    return state is not None and state.status in {"SUCCESS", "ERROR", "CANCELLED"}


def _failovers(cluster: LocalCluster, watched: list[tuple[float, str, int]]) -> list[float]:
    """Kill → next event of the session, for each run a killed worker held; a run whose new
    worker was killed too before it logged anything counts once, at the last kill."""
    times = []
    for killed_at, session_id, seq in watched:
        later = [r.at for r in cluster.records(session_id) if r.seq > seq and r.at >= killed_at]
        if not later:
            continue
        again = [t for t, s, _ in watched if s == session_id and killed_at < t < later[0]]
        if not again:
            times.append(later[0] - killed_at)
    return times


def free_port() -> int:
    """A loopback port nobody listens on now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def scrape(port: int) -> dict[str, float]:
    """The samples a `/metrics` endpoint on loopback serves, by name with labels."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples
