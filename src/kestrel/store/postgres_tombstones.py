"""The PostgreSQL store's side of cold storage: handing over rows, burying and reinstating them.

The tombstone table is created on every open (`postgres_schema.migrate`), so a database made
before cold storage existed gets it without a new schema version; older Kestrels ignore it.
The session row keeps its running totals while archived, so listings need no tombstone.
Each function runs inside one `Link.run` call: a transaction, committed by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kestrel.protocol.errors import SessionNotFound
from kestrel.store.sqlite_rows import decode
from kestrel.store.tombstones import ARCHIVED, ArchiveConflict, StoredRow, Tombstone

if TYPE_CHECKING:
    from kestrel.store.postgres_link import Conn

TOMBSTONE_TABLE = """CREATE TABLE IF NOT EXISTS kestrel_tombstones (
    session_id text COLLATE "C" PRIMARY KEY REFERENCES kestrel_sessions (id),
    json text NOT NULL
)"""

_INSERT = (
    "INSERT INTO kestrel_events (session_id, seq, at, type, json, cost_usd, tokens)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def rows(conn: Conn, session_id: str) -> list[StoredRow]:
    """Every event row of the session, in order, as stored."""
    found = conn.execute(
        "SELECT seq, at, type, json FROM kestrel_events WHERE session_id = %s ORDER BY seq",
        (session_id,),
    ).fetchall()
    return [StoredRow(seq=int(s), at=float(a), type=str(t), json=str(j)) for s, a, t, j in found]


def find(conn: Conn, session_id: str, *, lock: bool = False) -> Tombstone | None:
    """The session's tombstone, if it has one (its row held until commit with `lock`)."""
    held = " FOR UPDATE" if lock else ""
    row = conn.execute(
        f"SELECT json FROM kestrel_tombstones WHERE session_id = %s{held}",  # noqa: S608
        (session_id,),
    ).fetchone()
    return None if row is None else Tombstone.from_json(str(row[0]))


def bury(conn: Conn, tombstone: Tombstone) -> None:
    """Swap the session's rows for its tombstone, if it is still as the tombstone says."""
    sid = tombstone.session_id
    row = conn.execute(
        "SELECT last_seq, status FROM kestrel_sessions WHERE id = %s FOR UPDATE", (sid,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(f"no session {sid!r} to archive")
    if (int(row[0]), str(row[1])) != (tombstone.last_seq, tombstone.status):
        raise ArchiveConflict(
            f"session {sid} changed while it was being archived (now {row[1]}, "
            f"{row[0]} events); nothing was removed",
            session_id=sid,
        )
    conn.execute("INSERT INTO kestrel_tombstones VALUES (%s, %s)", (sid, tombstone.to_json()))
    conn.execute("DELETE FROM kestrel_events WHERE session_id = %s", (sid,))
    conn.execute("UPDATE kestrel_sessions SET status = %s WHERE id = %s", (ARCHIVED, sid))


def reinstate(conn: Conn, tombstone: Tombstone, stored: Sequence[StoredRow]) -> bool:
    """Put the rows back and drop the tombstone; False when the session is not archived."""
    sid = tombstone.session_id
    if find(conn, sid, lock=True) is None:
        return False
    with conn.cursor() as cursor:
        cursor.executemany(_INSERT, [(sid, *_columns(sid, row)) for row in stored])
    conn.execute("UPDATE kestrel_sessions SET status = %s WHERE id = %s", (tombstone.status, sid))
    conn.execute("DELETE FROM kestrel_tombstones WHERE session_id = %s", (sid,))
    return True


def _columns(session_id: str, row: StoredRow) -> tuple[object, ...]:
    """The row's columns, with a model call's cost and tokens as `append` writes them."""
    from kestrel.protocol.codec import DecodeError
    from kestrel.protocol.events import SPENDING_TYPES, spent_by

    cost = tokens = None
    if row.type in SPENDING_TYPES:
        try:
            usage = spent_by(decode(session_id, row.seq, row.json).event)
        except DecodeError:
            usage = None  # kept as it was; its spend is the session row's already
        if usage is not None:
            cost = usage.cost_usd
            tokens = usage.total_input_tokens + usage.output_tokens
    return (row.seq, row.at, row.type, row.json, cost, tokens)
