"""Chaos in a cluster on this machine: three workers, scripted sessions, a random worker SIGKILLed
and replaced every few seconds. Every session must end with the uninterrupted result, each
logged step once; prints the failover time (kill → that session's next event) p50 / p99.

    python bench/cluster_chaos.py [--sessions 30] [--kills 20] [--every 3] [--workers 3] [--apart]

With `--apart` every worker (each replacement too) has a data folder of its own, as on machines
of their own, and sessions' files travel as checkpoints in a shared folder.

Needs PostgreSQL (KESTREL_BENCH_POSTGRES, a libpq URL to create a scratch database from; by
default postgres on 127.0.0.1:5432) and the `cluster` extra.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import chaos, live_cluster

ADMIN = os.environ.get("KESTREL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--every", type=float, default=3.0, help="seconds between kills")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2, help="runs each worker takes at once")
    parser.add_argument("--steps", type=int, default=8, help="edits per scripted session")
    parser.add_argument("--keep", action="store_true", help="keep the workers' logs")
    parser.add_argument(
        "--apart", action="store_true", help="a data folder per worker; checkpoints shared"
    )
    args = parser.parse_args()
    import psycopg

    name = f"kestrel_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(ADMIN, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    url = ADMIN.rsplit("/", 1)[0] + "/" + name
    root = Path(tempfile.mkdtemp(prefix="kestrel-chaos-"))
    try:
        for cluster in live_cluster(url, root):
            if args.apart:
                cluster.share_url = (root / "shared").as_uri()
            for _ in range(args.workers):
                cluster.start_worker(args.slots)
            report = chaos(
                cluster,
                sessions=args.sessions,
                kills=args.kills,
                every_s=args.every,
                steps=args.steps,
            )
    except AssertionError:
        print(f"the workers' logs are kept in {root}", file=sys.stderr)
        raise
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    f = report.failovers
    print(
        f"{report.sessions} sessions, {args.workers} workers, {report.kills} kills, "
        f"{report.seconds:.0f} s; every session checked: same result, each step once"
    )
    if f:
        print(
            f"failover ({len(f)} runs taken over): p50 {statistics.median(f):.2f} s, "
            f"p99 {_percentile(f, 0.99):.2f} s, max {max(f):.2f} s"
        )


if __name__ == "__main__":
    main()
