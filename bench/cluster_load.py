"""Throughput of a cluster on this machine as workers are added: sessions per minute with 1, 2
and 4 workers, and how long runs waited on the queue by tier when there are more runs than
slots. Bounded in count and time; every session is checked as the chaos run checks them.

    python bench/cluster_load.py [--sessions 24] [--workers 1,2,4] [--slots 2]

Needs PostgreSQL (KESTREL_BENCH_POSTGRES, default postgres on 127.0.0.1:5432) and the `cluster`
extra. On a small machine the curve flattens where the cores, not the workers, run out.
"""

from __future__ import annotations

import argparse
import functools
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import check_session, ended, live_cluster, wait_for

from kestrel.protocol.events import Record, SessionResumed

ADMIN = os.environ.get("KESTREL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _one(workers: int, slots: int, sessions: int, steps: int) -> str:
    import psycopg

    name = f"kestrel_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(ADMIN, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    try:
        with tempfile.TemporaryDirectory() as root:
            for cluster in live_cluster(ADMIN.rsplit("/", 1)[0] + "/" + name, Path(root)):
                for _ in range(workers):
                    cluster.start_worker(slots)
                started = time.monotonic()
                runs = [
                    (cluster.new_session(f"s{n}", steps, tier=n % 3), n % 3)
                    for n in range(sessions)
                ]
                for (_, run), _tier in runs:
                    wait_for(functools.partial(ended, cluster, run), 900, f"run {run}")
                wall = time.monotonic() - started
                waits: dict[int, list[float]] = {}
                for (session_id, _), tier in runs:
                    records = check_session(cluster, session_id, steps)
                    waits.setdefault(tier, []).append(_waited(records))
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    by_tier = ", ".join(
        f"tier {t}: p50 {statistics.median(w):.1f} s max {max(w):.1f} s"
        for t, w in sorted(waits.items(), reverse=True)
    )
    rate = sessions / wall * 60
    return f"{workers} worker(s) x {slots}: {rate:.1f} sessions/min ({wall:.0f} s); wait {by_tier}"


def _waited(records: list[Record]) -> float:
    """Seconds from the session's creation to its run's start (its first `session_resumed`)."""
    resumed = [r.at for r in records if isinstance(r.event, SessionResumed)]
    return (resumed[0] if resumed else records[-1].at) - records[0].at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    for workers in (int(w) for w in args.workers.split(",")):
        print(_one(workers, args.slots, args.sessions, args.steps), flush=True)


if __name__ == "__main__":
    main()
