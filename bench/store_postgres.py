"""The event log in SQLite and in PostgreSQL on loopback: append throughput, and how long an
event takes to reach a follower in another process.

Appends: one writer appends `--appends` tool results (about 600 bytes of JSON each) to one
session, each committed before the next; prints events per second and the per-append p50/p99.
Follow: a follower process subscribes to the session (SQLite: polling every 50 ms, the store's
default; PostgreSQL: LISTEN/NOTIFY, polling every 0.5 s as a fallback); this process appends
`--follow` events 20 ms apart, and the follower reports when each arrived. Latency runs from
the event's timestamp (taken just before its transaction) to its arrival, and from the moment
`append` returned (committed) to its arrival; both processes read the same clock. SQLite runs
twice: `synchronous=NORMAL` (the default) and `FULL`, which syncs each commit as PostgreSQL
does. PostgreSQL runs in a database created for the run and dropped after it.

    python bench/store_postgres.py [--appends 2000] [--follow 200]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import functools
import json
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kestrel.protocol.events import SessionStarted, ToolFinished
from kestrel.store.base import EventStore

FOLLOWER = """
import asyncio, json, sys, time
from pathlib import Path

kind, where, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

def open_store():
    if kind == "sqlite":
        from kestrel.store.sqlite import SQLiteStore
        return SQLiteStore(Path(where))
    from kestrel.store.postgres import PostgresStore
    store = PostgresStore(where)
    assert store.listening()
    return store

async def main() -> None:
    store = open_store()
    it = store.subscribe("bench")
    await anext(it)  # session_started: the decoding imports are done before timing starts
    print("ready", flush=True)
    arrived = []
    for _ in range(count):
        record = await anext(it)
        arrived.append([record.seq, time.time()])
    print(json.dumps(arrived), flush=True)

asyncio.run(main())
"""


def _event(i: int) -> ToolFinished:
    return ToolFinished(call_id=f"call-{i}", name="bash", content=f"line {i}\n" * 64)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def appends(store: EventStore, count: int) -> str:
    """Append `count` events to a new session; the throughput line."""
    store.append(
        "bench-append", SessionStarted(session_id="bench-append", task="t", cwd="/", model="m")
    )
    took: list[float] = []
    began = time.perf_counter()
    for i in range(count):
        start = time.perf_counter()
        store.append("bench-append", _event(i))
        took.append(time.perf_counter() - start)
    rate = count / (time.perf_counter() - began)
    return (
        f"append   {rate:8.0f} events/s   p50 {_ms(took, 0.5):6.2f} ms"
        f"   p99 {_ms(took, 0.99):6.2f} ms   (n={count})"
    )


def follow(store: EventStore, kind: str, where: str, count: int) -> str:
    """Append `count` events 20 ms apart while another process follows; the latency lines."""
    store.append("bench", SessionStarted(session_id="bench", task="t", cwd="/", model="m"))
    child = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, kind, where, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    sent: dict[int, tuple[float, float]] = {}
    for i in range(count):
        record = store.append("bench", _event(i))
        sent[record.seq] = (record.at, time.time())
        time.sleep(0.02)
    arrived = json.loads(child.stdout.readline())
    child.wait(timeout=60)
    from_event = [when - sent[seq][0] for seq, when in arrived]
    from_commit = [when - sent[seq][1] for seq, when in arrived]
    return "\n  ".join(
        f"follow   p50 {_ms(delays, 0.5):6.2f} ms   p99 {_ms(delays, 0.99):6.2f} ms"
        f"   max {1000 * max(delays):6.2f} ms   ({what}, n={count})"
        for what, delays in (("from append", from_event), ("from commit", from_commit))
    )


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A database created for the run, dropped after it."""
    import psycopg

    name = f"kestrel_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            info = psycopg.conninfo.conninfo_to_dict(admin_url)
            info["dbname"] = name
            yield psycopg.conninfo.make_conninfo(**info)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run(
    name: str, opened: Callable[[], EventStore], kind: str, where: str, args: argparse.Namespace
) -> None:
    """Both measurements on one kind of store."""
    store = opened()
    try:
        print(f"{name}")
        print("  " + appends(store, args.appends))
        print("  " + follow(store, kind, where, args.follow))
    finally:
        store.close()


def main() -> None:
    """Measure SQLite, then PostgreSQL, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--follow", type=int, default=200)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    from kestrel.store.postgres import PostgresStore
    from kestrel.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="kestrel-store-bench-") as folder:
        for sync in ("NORMAL", "FULL"):
            path = Path(folder) / f"{sync.lower()}.db"
            opened = functools.partial(SQLiteStore, path, synchronous=sync)
            run(f"SQLite, WAL, synchronous={sync}", opened, "sqlite", str(path), args)
    with postgres_database(args.postgres) as url:
        opened = functools.partial(PostgresStore, url)
        run("PostgreSQL, loopback TCP, synchronous_commit=on", opened, "postgres", url, args)


if __name__ == "__main__":
    main()
