"""Which tenant owns each hosted session, where its checkout is, and where it stands in the queue.

Every query takes the tenant: a session of another tenant is as absent as one that never
existed. The next message of a session (a follow-up, a plan decision) is kept here until a
worker runs it, so a restart of the server loses none.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Status = Literal["queued", "running", "idle"]
"""queued: waits for a worker; running: a worker runs it; idle: no process runs it."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hosted (
    session_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    tier INTEGER NOT NULL,
    checkout TEXT NOT NULL,
    status TEXT NOT NULL,
    next_message TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    sent_after INTEGER
);
CREATE INDEX IF NOT EXISTS hosted_by_tenant ON hosted (tenant_id, created_at);
"""


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


class Registry:
    """The server's table of hosted sessions (SQLite, safe from several threads)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._locked() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            known = {str(row[1]) for row in conn.execute("PRAGMA table_info(hosted)")}
            if "sent_after" not in known:  # A table made before the column existed.
                conn.execute("ALTER TABLE hosted ADD COLUMN sent_after INTEGER")

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()

    def add(self, hosted: Hosted) -> None:
        """Record a new session."""
        with self._locked() as conn:
            conn.execute(
                _INSERT,
                (
                    hosted.session_id,
                    hosted.tenant_id,
                    hosted.user_id,
                    hosted.tier,
                    str(hosted.checkout),
                    hosted.status,
                    hosted.next_message,
                    hosted.created_at,
                    hosted.sent_after,
                    time.time(),
                ),
            )

    def get(self, tenant_id: str, session_id: str) -> Hosted | None:
        """The tenant's session, or None (also for another tenant's)."""
        with self._locked() as conn:
            row = conn.execute(
                _SELECT_ONE,
                (tenant_id, session_id),
            ).fetchone()
        return _hosted(row) if row else None

    def of_tenant(self, tenant_id: str) -> list[Hosted]:
        """The tenant's sessions, newest first."""
        with self._locked() as conn:
            rows = conn.execute(
                _SELECT_TENANT,
                (tenant_id,),
            ).fetchall()
        return [_hosted(row) for row in rows]

    def unfinished(self) -> list[Hosted]:
        """Sessions queued or running when the server stopped, oldest first."""
        with self._locked() as conn:
            rows = conn.execute(_SELECT_UNFINISHED).fetchall()
        return [_hosted(row) for row in rows]

    def counts(self, tenant_id: str) -> tuple[int, int]:
        """How many of the tenant's sessions run and wait in the queue."""
        with self._locked() as conn:
            rows = conn.execute(
                "SELECT status, COUNT(*) FROM hosted WHERE tenant_id = ? GROUP BY status",
                (tenant_id,),
            ).fetchall()
        found = {str(status): int(count) for status, count in rows}
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
    ) -> bool:
        """Move a session from `expect` (None: from any status) to `status`, at once for all
        threads and processes: False, and nothing changed, when it was not in `expect`. Two
        requests that both find a session idle cannot both queue it."""
        query = (
            "UPDATE hosted SET status = ?, next_message = ?, sent_after = ?, updated_at = ? "
            "WHERE session_id = ?"
        )
        args: tuple[object, ...] = (status, next_message, sent_after, time.time(), session_id)
        if expect is not None:
            query += " AND status = ?"
            args += (expect,)
        with self._locked() as conn:
            return conn.execute(query, args).rowcount == 1

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._conn


_INSERT = (
    "INSERT INTO hosted (session_id, tenant_id, user_id, tier, checkout, status, next_message, "
    "created_at, sent_after, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = (
    "SELECT session_id, tenant_id, user_id, tier, checkout, status, next_message, created_at, "
    "sent_after FROM hosted "
)
_SELECT_ONE = _SELECT + "WHERE tenant_id = ? AND session_id = ?"
_SELECT_TENANT = _SELECT + "WHERE tenant_id = ? ORDER BY created_at DESC"
_SELECT_UNFINISHED = _SELECT + "WHERE status IN ('queued', 'running') ORDER BY created_at"


def _hosted(row: tuple[object, ...]) -> Hosted:
    sid, tenant, user, tier, checkout, status, message, created, sent_after = row
    return Hosted(
        session_id=str(sid),
        tenant_id=str(tenant),
        user_id=str(user),
        tier=int(str(tier)),
        checkout=Path(str(checkout)),
        status=str(status),  # type: ignore[arg-type]
        next_message=None if message is None else str(message),
        created_at=float(str(created)),
        sent_after=None if sent_after is None else int(str(sent_after)),
    )
