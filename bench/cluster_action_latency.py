"""Action-to-client latency in a cluster on this machine: how long an event a session's process
logs on a worker takes to reach a live client of another server, with 1, 2 and 4 workers.

Two `kestrel serve` servers in cluster mode (PostgreSQL, Redis fan-out) and the workers; each
session is created through server A's API and followed from its start over server B's SSE
stream. Latency = arrival at the client - the record's `at` (its append time, same clock), for
the events logged after the client connected (earlier ones are read back from the log).
Bounded in count and time; every session must finish `done` and B must deliver every event.

    python bench/cluster_action_latency.py [--sessions 8] [--workers 1,2,4] [--steps 4]

Needs PostgreSQL (KESTREL_BENCH_POSTGRES, default postgres on 127.0.0.1:5432), Redis
(KESTREL_BENCH_REDIS, default 127.0.0.1:6379) and the `cluster` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import free_port, script, wait_for

ADMIN = os.environ.get("KESTREL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("KESTREL_BENCH_REDIS", "redis://127.0.0.1:6379/0")
KESTREL = [sys.executable, "-m", "kestrel"]
PLANS = """
[bench]
tier = 0
max_concurrent_sessions = 1000
max_queued_sessions = 1000
max_wall_s = 900
requests_per_minute = 100000
"""


class Follower(threading.Thread):
    """Reads one session's SSE stream from its start; the latency of each event."""

    def __init__(self, client: httpx.Client, session_id: str) -> None:
        super().__init__(daemon=True)
        self.client, self.session_id = client, session_id
        self.latencies: list[float] = []
        self.seqs: list[int] = []
        self.start()

    def run(self) -> None:
        with self.client.stream("GET", f"/sessions/{self.session_id}/events/stream") as answer:
            connected = time.time()
            for line in answer.iter_lines():
                if not (line.startswith("data: ") and '"seq"' in line):
                    continue
                now = time.time()
                record = json.loads(line[6:])
                if float(record["at"]) >= connected:  # Live, not read back from the log.
                    self.latencies.append(now - float(record["at"]))
                self.seqs.append(int(record["seq"]))
                if record["event"]["type"] == "session_finished":
                    return


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT)


def _servers(root: Path, env: dict[str, str]) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs, urls = [], []
    for name in ("a", "b"):
        port = free_port()
        argv = [*KESTREL, "serve", "--port", str(port), "--data-dir", env["KESTREL_DATA_DIR"]]
        argv += ["--allowed-root", str(root / "repos"), "--plans", str(root / "plans.toml")]
        argv += ["--allow-scripted-models", str(root / "scripts"), "--min-free-mb", "1"]
        procs.append(_start(argv, env, root / f"server-{name}.log"))
        urls.append(f"http://127.0.0.1:{port}")
    for url in urls:
        wait_for(lambda url=url: _ready(url), 120, f"the server at {url}")
    return procs, urls


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _workers(root: Path, env: dict[str, str], count: int) -> list[subprocess.Popen[bytes]]:
    logs = [root / f"worker-{n}.log" for n in range(count)]
    procs = [_start([*KESTREL, "worker", "--slots", "2"], env, log) for log in logs]
    for log in logs:
        wait_for(lambda log=log: ": ready" in log.read_text(errors="replace"), 120, "a worker")
    return procs


def _session(root: Path, client: httpx.Client, n: int, steps: int) -> str:
    repo = root / "repos" / f"r{n}"
    repo.mkdir(parents=True)
    (repo / "count.py").write_text("COUNT = 0\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args]
        subprocess.run(git, cwd=repo, check=True)
    path = root / "scripts" / f"s{n}.json"
    path.write_text(json.dumps(script(steps)))
    body = {"task": "count up", "source": {"path": str(repo)}, "model": f"scripted:{path}"}
    made = client.post("/sessions", json={**body, "permission_mode": "accept-edits"})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _one(workers: int, sessions: int, steps: int) -> str:
    import psycopg

    name = f"kestrel_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(ADMIN, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for folder in ("repos", "scripts", "home", "data"):
                (root / folder).mkdir()
            (root / "plans.toml").write_text(PLANS)
            env = {
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(root / "home"),
                "PYTHONUNBUFFERED": "1",
                "KESTREL_STORE_URL": ADMIN.rsplit("/", 1)[0] + "/" + name,
                "KESTREL_REDIS_URL": REDIS,
                "KESTREL_REDIS_PREFIX": f"bench-{secrets.token_hex(4)}:",
                "KESTREL_DATA_DIR": str(root / "data"),
            }
            servers, urls = _servers(root, env)
            procs += servers
            procs += _workers(root, env, workers)
            token_argv = [*KESTREL, "serve", "tokens", "create", "--tenant", "t", "--plan"]
            token_argv += ["bench", "--data-dir", env["KESTREL_DATA_DIR"]]
            token = subprocess.run(
                token_argv, env=env, capture_output=True, text=True, check=True
            ).stdout.split()[-1]
            auth = {"Authorization": f"Bearer {token}"}
            on_a = httpx.Client(base_url=urls[0] + "/v1", headers=auth, timeout=60)
            on_b = httpx.Client(base_url=urls[1] + "/v1", headers=auth, timeout=None)
            started = time.monotonic()
            followers = [Follower(on_b, _session(root, on_a, n, steps)) for n in range(sessions)]
            for follower in followers:
                follower.join(timeout=900)
                assert not follower.is_alive(), f"session {follower.session_id} did not end"
                logged = on_a.get(f"/sessions/{follower.session_id}/events").json()
                seqs = [e["seq"] for e in logged][: len(follower.seqs)]  # Up to its finish.
                assert follower.seqs == seqs, "B missed or repeated events"
            wall = time.monotonic() - started
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    late = sorted(x for f in followers for x in f.latencies)
    p99 = late[min(len(late) - 1, round(0.99 * (len(late) - 1)))]
    return (
        f"{workers} worker(s): {len(late)} live events of {sessions} sessions in {wall:.0f} s;"
        f" action-to-client p50 {statistics.median(late) * 1000:.0f} ms,"
        f" p99 {p99 * 1000:.0f} ms, max {late[-1] * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    for workers in (int(w) for w in args.workers.split(",")):
        print(_one(workers, args.sessions, args.steps), flush=True)


if __name__ == "__main__":
    main()
