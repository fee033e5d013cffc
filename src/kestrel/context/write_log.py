"""Which paths each write to the index touched, so that a reopen reads only those rows.

Every write of records or stats appends the paths it wrote to the `written` table, in its own
transaction. A snapshot written from exactly the saved records notes the log's position; a
reopen then reads only the rows logged after that position and takes every other file's stat
from the snapshot. A writer that does not log (an older Kestrel) is noticed by the highest row
id of `files`, noted after every logged write: when it moved unlogged, the log vouches only for
positions from the next write on (and a reopen that finds it moved reads every row).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS written "
    "(seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL);"
)


def begin(db: sqlite3.Connection) -> None:
    """At the start of a write, before its rows: notice rows written unlogged since the last."""
    if _meta(db, "logged_rowid") != str(_max_rowid(db)):
        _set(db, "log_valid_from", str(position(db) + 1))


def end(db: sqlite3.Connection, paths: Sequence[str]) -> None:
    """At the end of a write (same transaction): log its paths."""
    db.executemany("INSERT INTO written(path) VALUES (?)", ((p,) for p in paths))
    _set(db, "logged_rowid", str(_max_rowid(db)))


def position(db: sqlite3.Connection) -> int:
    """The position of the last logged path (kept when older entries are pruned)."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'written'").fetchone()
    return 0 if row is None else int(row[0])


def since(db: sqlite3.Connection, at: int) -> list[str] | None:
    """The paths written after position `at`; None when the log cannot vouch for that."""
    valid_from = int(_meta(db, "log_valid_from") or 1)
    if at < valid_from - 1 or _meta(db, "logged_rowid") != str(_max_rowid(db)):
        return None
    rows = db.execute("SELECT DISTINCT path FROM written WHERE seq > ?", (at,))
    return [row[0] for row in rows]


def prune(db: sqlite3.Connection, at: int) -> None:
    """Forget the paths logged up to position `at` (a snapshot of them is on disk)."""
    db.execute("DELETE FROM written WHERE seq <= ?", (at,))


def _max_rowid(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT COALESCE(MAX(rowid), 0) FROM files").fetchone()[0])


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
