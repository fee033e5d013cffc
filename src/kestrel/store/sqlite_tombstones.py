"""The SQLite store's side of cold storage: handing over rows, burying and reinstating them.

Tombstones live in a table of their own, created on every open like the spend indexes (older
Kestrels never look at it, and list an archived session with its status and no events).
Each function runs on a connection in autocommit mode; the writing ones are one transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence

from kestrel.protocol.errors import SessionNotFound
from kestrel.store.sqlite_faults import rollback
from kestrel.store.tombstones import ARCHIVED, ArchiveConflict, StoredRow, Tombstone

TOMBSTONE_SCHEMA = """CREATE TABLE IF NOT EXISTS tombstones (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    json TEXT NOT NULL
)"""


def rows(conn: sqlite3.Connection, session_id: str) -> list[StoredRow]:
    """Every event row of the session, in order, as stored."""
    found = conn.execute(
        "SELECT seq, at, type, json FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
    ).fetchall()
    return [StoredRow(seq=int(s), at=float(a), type=str(t), json=str(j)) for s, a, t, j in found]


def find(conn: sqlite3.Connection, session_id: str) -> Tombstone | None:
    """The session's tombstone, if it has one."""
    row = conn.execute("SELECT json FROM tombstones WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else Tombstone.from_json(str(row[0]))


def every(conn: sqlite3.Connection) -> dict[str, Tombstone]:
    """Every tombstone, by session."""
    found = conn.execute("SELECT session_id, json FROM tombstones").fetchall()
    return {str(sid): Tombstone.from_json(str(text)) for sid, text in found}


def bury(conn: sqlite3.Connection, tombstone: Tombstone) -> None:
    """Swap the session's rows for its tombstone, if it is still as the tombstone says."""
    sid = tombstone.session_id
    with _transaction(conn):
        row = conn.execute("SELECT last_seq, status FROM sessions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {sid!r} to archive")
        if (int(row[0]), str(row[1])) != (tombstone.last_seq, tombstone.status):
            raise ArchiveConflict(
                f"session {sid} changed while it was being archived (now {row[1]}, "
                f"{row[0]} events); nothing was removed",
                session_id=sid,
            )
        conn.execute("INSERT INTO tombstones VALUES (?, ?)", (sid, tombstone.to_json()))
        conn.execute("DELETE FROM events WHERE session_id = ?", (sid,))
        conn.execute("UPDATE sessions SET status = ? WHERE id = ?", (ARCHIVED, sid))


def reinstate(conn: sqlite3.Connection, tombstone: Tombstone, stored: Sequence[StoredRow]) -> bool:
    """Put the rows back and drop the tombstone; False when the session is not archived."""
    sid = tombstone.session_id
    with _transaction(conn):
        if find(conn, sid) is None:
            return False
        conn.executemany(
            "INSERT INTO events (session_id, seq, at, type, json) VALUES (?, ?, ?, ?, ?)",
            [(sid, r.seq, r.at, r.type, r.json) for r in stored],
        )
        conn.execute("UPDATE sessions SET status = ? WHERE id = ?", (tombstone.status, sid))
        conn.execute("DELETE FROM tombstones WHERE session_id = ?", (sid,))
    return True


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
