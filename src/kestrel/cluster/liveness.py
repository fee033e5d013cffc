"""Who is alive: each worker beats in a table, and the survivors take over a dead one's runs.

The engine keeps each run's owner (its executor id) but has no way, without its paid control
plane, to tell that an owner died. So every worker upserts its row in `kestrel_executors` every
`BEAT_S`, and every worker, at the same pace, deletes the rows that stopped beating for
`DEAD_AFTER_S` and asks the engine to put those executors' pending runs back on the queue. The
`DELETE … RETURNING` hands each dead id to exactly one survivor, and the engine's hand-over from
queued to running admits one runner however often a run is recovered.

A worker that finds its own row gone was taken for dead (it was paused, or cut off from the
database, for longer than `DEAD_AFTER_S`): its runs are someone else's now, so it kills its
session processes and exits at once, before they write another event.

A worker only judges others after it has itself reached the database for `DEAD_AFTER_S` without
a break: when the database comes back after an outage every row is stale, and the first worker
to reconnect must not take the rest, which simply have not beaten yet, for dead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

BEAT_S = 0.5
DEAD_AFTER_S = 3.0
"""Silence after which a worker counts as dead: six missed beats, so that a busy machine's
late beats do not get a live worker evicted (none was in the chaos runs on two loaded cores)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kestrel_executors (
    executor_id text PRIMARY KEY,
    pid integer NOT NULL,
    host text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    beat_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kestrel_failovers (
    dead_executor text NOT NULL,
    by_executor text NOT NULL,
    runs integer NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
)
"""


def connect(url: str) -> Any:
    """An autocommit connection to the cluster's database."""
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def join(conn: Any, executor_id: str) -> None:
    """Create the table if needed and enter this worker in it."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('kestrel_executors'))")
        conn.execute(_SCHEMA)
    conn.execute(
        "INSERT INTO kestrel_executors (executor_id, pid, host) VALUES (%s, %s, %s)",
        (executor_id, os.getpid(), os.uname().nodename),
    )


def beat(conn: Any, executor_id: str) -> bool:
    """Say this worker lives; False when its row is gone (the others took it for dead)."""
    cur = conn.execute(
        "UPDATE kestrel_executors SET beat_at = now() WHERE executor_id = %s", (executor_id,)
    )
    return bool(cur.rowcount)


def claim_dead(conn: Any, dead_after_s: float = DEAD_AFTER_S) -> list[str]:
    """Remove the workers silent for `dead_after_s` and return their ids (each to one caller)."""
    rows = conn.execute(
        "DELETE FROM kestrel_executors WHERE beat_at < now() - make_interval(secs => %s)"
        " RETURNING executor_id",
        (dead_after_s,),
    ).fetchall()
    return [row[0] for row in rows]


def leave(conn: Any, executor_id: str) -> None:
    """Take this worker out of the table (a clean stop: it has no runs left)."""
    conn.execute("DELETE FROM kestrel_executors WHERE executor_id = %s", (executor_id,))


def members(conn: Any) -> list[tuple[str, float]]:
    """Every live worker's id and seconds since its last beat."""
    rows = conn.execute(
        "SELECT executor_id, extract(epoch FROM now() - beat_at) FROM kestrel_executors"
        " ORDER BY started_at"
    ).fetchall()
    return [(row[0], float(row[1])) for row in rows]


class Supervisor:
    """Beats for this worker and recovers dead ones, on a thread of its own."""

    def __init__(
        self,
        url: str,
        executor_id: str,
        *,
        recover: Callable[[list[str]], int],
        on_evicted: Callable[[], None],
    ) -> None:
        """`recover(ids)`: put the dead executors' runs back on the queue, return how many.
        `on_evicted()`: called when this worker finds itself taken for dead; it must not
        return (the worker exits)."""
        self._url = url
        self._id = executor_id
        self._recover = recover
        self._on_evicted = on_evicted
        self._stop = threading.Event()
        self._in_contact_since = time.monotonic()
        self._conn = connect(url)
        join(self._conn, executor_id)
        self._thread = threading.Thread(target=self._run, name="kestrel-liveness", daemon=True)

    def start(self) -> None:
        """Start beating."""
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and leave the table."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            leave(self._conn, self._id)
        finally:
            self._conn.close()

    def _run(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self._tick()
            except Exception as exc:  # The database is away: keep trying; others wait too.
                logger.warning("the cluster database did not answer a heartbeat: %s", exc)
                self._in_contact_since = time.monotonic()
                self._reconnect()

    def _tick(self) -> None:
        if not beat(self._conn, self._id):
            logger.error("this worker was taken for dead by the others; stopping its runs")
            self._on_evicted()
        if time.monotonic() - self._in_contact_since < DEAD_AFTER_S + BEAT_S:
            return  # Just back in touch: the others may not have beaten since either.
        dead = claim_dead(self._conn)
        if dead:
            count = self._recover(dead)
            self._conn.execute(
                "INSERT INTO kestrel_failovers (dead_executor, by_executor, runs)"
                " VALUES (%s, %s, %s)",
                (", ".join(dead), self._id, count),
            )
            logger.warning("took over %d run(s) of dead worker(s) %s", count, ", ".join(dead))

    def _reconnect(self) -> None:
        try:
            self._conn.close()
            self._conn = connect(self._url)
        except Exception as exc:
            logger.warning("the cluster database is still away: %s", exc)
