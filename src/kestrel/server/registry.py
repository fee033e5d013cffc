"""Which tenant owns each hosted session, where its checkout is, and where it stands in the queue.

Every query takes the tenant: a session of another tenant is as absent as one that never
existed. The next message of a session (a follow-up, a plan decision) is kept here until a
worker runs it, so a restart of the server loses none. The table is in SQLite (`server.db`) on
one machine, or in the cluster's PostgreSQL database (`sql_pg`), where every server and worker
moves sessions between statuses with the same compare-and-set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kestrel.server.sql import Database, SQLiteDatabase, Tx

Status = Literal["queued", "running", "idle"]
"""queued: waits for a worker; running: a worker runs it; idle: no process runs it."""

TABLE = "hosted"
"""The table's name (in the `kestrel_server` schema in PostgreSQL); the cluster's workers move
a run's session from queued to running and back to idle in it (`kestrel.cluster.runs`)."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS hosted (
    session_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    tier INTEGER NOT NULL,
    checkout TEXT NOT NULL,
    status TEXT NOT NULL,
    next_message TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    sent_after BIGINT,
    run_id TEXT
)""",
    "CREATE INDEX IF NOT EXISTS hosted_by_tenant ON hosted (tenant_id, created_at)",
    "CREATE INDEX IF NOT EXISTS hosted_by_status ON hosted (status)",
)
_ADDED = {"sent_after": "BIGINT", "run_id": "TEXT"}
"""Columns a SQLite table made by an older Kestrel may lack."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hosted:
    """One hosted session as the server knows it."""

    session_id: str
    tenant_id: str
    user_id: str
    tier: int
    checkout: Path
    status: Status
    next_message: str | None
    created_at: float
    sent_after: int | None = None
    """The last event logged before the run that sends `next_message` began (None: not begun)."""
    run_id: str | None = None
    """In cluster mode, the queued run's id on the durable queue (None: none queued)."""
    updated_at: float = 0.0


class Registry:
    """The server's table of hosted sessions (safe from several threads; in PostgreSQL, from
    several machines)."""

    def __init__(self, where: Path | Database) -> None:
        self._db = SQLiteDatabase(where) if isinstance(where, Path) else where
        self._db.migrate(_SCHEMA)
        if isinstance(self._db, SQLiteDatabase):
            self._db.write(_add_columns)

    @property
    def database(self) -> Database:
        """Where the table is."""
        return self._db

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def add(self, hosted: Hosted) -> None:
        """Record a new session."""
        row = (
            hosted.session_id,
            hosted.tenant_id,
            hosted.user_id,
            hosted.tier,
            str(hosted.checkout),
            hosted.status,
            hosted.next_message,
            hosted.created_at,
            hosted.sent_after,
            hosted.run_id,
            time.time(),
        )
        self._db.write(lambda tx: tx.execute(_INSERT, row))

    def get(self, tenant_id: str, session_id: str) -> Hosted | None:
        """The tenant's session, or None (also for another tenant's)."""
        row = self._db.read(lambda tx: tx.execute(_SELECT_ONE, (tenant_id, session_id)).one())
        return _hosted(row) if row else None

    def find(self, session_id: str) -> Hosted | None:
        """The session whoever its tenant is: for the server's own bookkeeping, never for a
        request (those name the tenant, `get`)."""
        row = self._db.read(lambda tx: tx.execute(_SELECT_ANY, (session_id,)).one())
        return _hosted(row) if row else None

    def of_tenant(self, tenant_id: str) -> list[Hosted]:
        """The tenant's sessions, newest first."""
        rows = self._db.read(lambda tx: tx.execute(_SELECT_TENANT, (tenant_id,)).rows)
        return [_hosted(row) for row in rows]

    def unfinished(self) -> list[Hosted]:
        """Sessions queued or running (when the server stopped, on one machine), oldest first."""
        rows = self._db.read(lambda tx: tx.execute(_SELECT_UNFINISHED).rows)
        return [_hosted(row) for row in rows]

    def counts(self, tenant_id: str) -> tuple[int, int]:
        """How many of the tenant's sessions run and wait in the queue."""
        rows = self._db.read(
            lambda tx: (
                tx.execute(
                    "SELECT status, COUNT(*) FROM hosted WHERE tenant_id = ? GROUP BY status",
                    (tenant_id,),
                ).rows
            )
        )
        found = {str(status): int(str(count)) for status, count in rows}
        return found.get("running", 0), found.get("queued", 0)

    def set_status(
        self,
        session_id: str,
        status: Status,
        *,
        next_message: str | None = None,
        sent_after: int | None = None,
    ) -> None:
        """Move a session to `status`, with the message its next run sends (if any)."""
        self.claim(session_id, None, status, next_message=next_message, sent_after=sent_after)

    def claim(
        self,
        session_id: str,
        expect: Status | None,
        status: Status,
        *,
        next_message: str | None = None,
        sent_after: int | None = None,
        run_id: str | None = None,
    ) -> bool:
        """Move a session from `expect` (None: from any status) to `status`, at once for all
        threads, processes and machines: False, and nothing changed, when it was not in
        `expect`. Two requests that both find a session idle cannot both queue it."""
        query = (
            "UPDATE hosted SET status = ?, next_message = ?, sent_after = ?, run_id = ?, "
            "updated_at = ? WHERE session_id = ?"
        )
        args: tuple[object, ...] = (status, next_message, sent_after, run_id, time.time())
        args += (session_id,)
        if expect is not None:
            query += " AND status = ?"
            args += (expect,)
        return self._db.write(lambda tx: tx.execute(query, args).rowcount == 1)

    def settle(self, session_id: str, run_id: str) -> bool:
        """Make a session idle whose run `run_id` ended without saying so (its worker failed
        where no other took it over); False when the session has moved on since."""
        query = (
            "UPDATE hosted SET status = 'idle', next_message = NULL, updated_at = ? "
            "WHERE session_id = ? AND run_id = ? AND status IN ('queued', 'running')"
        )
        args = (time.time(), session_id, run_id)
        return self._db.write(lambda tx: tx.execute(query, args).rowcount == 1)

    def ping(self) -> None:
        """Reach the database now, or raise (a readiness check)."""
        self._db.ping()


def _add_columns(tx: Tx) -> None:
    known = {str(row[1]) for row in tx.execute("PRAGMA table_info(hosted)").rows}
    for name, kind in _ADDED.items():
        if name not in known:  # A table made before the column existed.
            tx.execute(f"ALTER TABLE hosted ADD COLUMN {name} {kind}")


_INSERT = (
    "INSERT INTO hosted (session_id, tenant_id, user_id, tier, checkout, status, next_message, "
    "created_at, sent_after, run_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = (
    "SELECT session_id, tenant_id, user_id, tier, checkout, status, next_message, created_at, "
    "sent_after, run_id, updated_at FROM hosted "
)
_SELECT_ONE = _SELECT + "WHERE tenant_id = ? AND session_id = ?"
_SELECT_ANY = _SELECT + "WHERE session_id = ?"
_SELECT_TENANT = _SELECT + "WHERE tenant_id = ? ORDER BY created_at DESC"
_SELECT_UNFINISHED = _SELECT + "WHERE status IN ('queued', 'running') ORDER BY created_at"


def _hosted(row: tuple[object, ...]) -> Hosted:
    sid, tenant, user, tier, checkout, status, message, created, sent, run_id, updated = row
    return Hosted(
        session_id=str(sid),
        tenant_id=str(tenant),
        user_id=str(user),
        tier=int(str(tier)),
        checkout=Path(str(checkout)),
        status=str(status),  # type: ignore[arg-type]
        next_message=None if message is None else str(message),
        created_at=float(str(created)),
        sent_after=None if sent is None else int(str(sent)),
        run_id=None if run_id is None else str(run_id),
        updated_at=float(str(updated)),
    )
