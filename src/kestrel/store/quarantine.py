"""Events that cannot be read are set aside, not fatal: moved from `events` to `quarantine`.

A row whose JSON is garbage or whose event type this Kestrel does not know would otherwise stop
every command that reads its session. Moving it keeps the rest of the session usable and the
row itself on disk, with the reason, for a person to look at.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import typing
from collections.abc import Sequence

QUARANTINE_SCHEMA = """CREATE TABLE IF NOT EXISTS quarantine (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at REAL,
    type TEXT,
    json TEXT,
    reason TEXT NOT NULL,
    quarantined_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
)"""
"""Created on every open, like the spend indexes; older Kestrels never look at it."""


def set_aside(conn: sqlite3.Connection, rows: Sequence[tuple[str, int, str]], now: float) -> None:
    """Move each `(session_id, seq, reason)` row from `events` into `quarantine`, in one
    transaction on `conn` (a connection in autocommit mode)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for session_id, seq, reason in rows:
            conn.execute(
                "INSERT OR REPLACE INTO quarantine"
                " SELECT session_id, seq, at, type, json, ?, ? FROM events"
                " WHERE session_id = ? AND seq = ?",
                (reason, now, session_id, seq),
            )
            conn.execute("DELETE FROM events WHERE session_id = ? AND seq = ?", (session_id, seq))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def invalid_json(conn: sqlite3.Connection) -> list[tuple[str, int, str]]:
    """Every event row whose text is not JSON, as `(session_id, seq, reason)`: such a row stops
    SQLite's own JSON functions, which the session list and the day's spend use."""
    rows = conn.execute("SELECT session_id, seq FROM events WHERE NOT json_valid(json)").fetchall()
    return [(str(sid), int(seq), "not JSON") for sid, seq in rows]


def count(conn: sqlite3.Connection) -> int:
    """How many events are in quarantine."""
    return int(conn.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0])


def brief(text: str, reason: str) -> str:
    """Why a row cannot be read, in a few words for a one-line warning: the decoder's own account
    of an unknown event type lists every known type, over several lines."""
    try:
        data = json.loads(text)
    except ValueError:
        return "not JSON"
    event = data.get("event") if isinstance(data, dict) else None
    kind = event.get("type") if isinstance(event, dict) else None
    if isinstance(kind, str) and kind not in _known_types():
        return f"unknown event type {kind!r}"
    first = reason.splitlines()[0] if reason else "unreadable"
    return first if len(first) <= 160 else first[:157] + "..."


@functools.cache
def _known_types() -> frozenset[str]:
    from kestrel.protocol.events import Event

    union = typing.get_args(Event)[0]
    return frozenset(cls.__dataclass_fields__["type"].default for cls in typing.get_args(union))
