"""Salvage a damaged event store: read what can be read into a new database, keep the old file.

SQLite's own `.recover` (in the `sqlite3` command-line tool, where installed) reads every page
it can, even when the b-trees above them are torn; a row-by-row copy with Python's `sqlite3`
runs as well and catches what is left. Both feed one new store, built by `SQLiteStore` itself, so
the result is a store this Kestrel opens. The damaged file is moved aside, never deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.errors import StoreError
from kestrel.store.sqlite import SQLiteStore
from kestrel.store.sqlite_faults import check_header, translate

_SIDE_FILES = ("-wal", "-shm")
_TABLES = {
    "sessions": "id, created_at, updated_at, task, cwd, model, status, last_seq",
    "events": "session_id, seq, at, type, json",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Salvaged:
    """What `salvage` saved, and where the damaged file went."""

    sessions: int
    events: int
    broken: Path
    """The damaged file, moved aside next to the new store."""


def damage(path: Path) -> str | None:
    """Why the store at `path` needs repair, or None when it opens and passes SQLite's check."""
    if not path.exists():
        return None
    try:
        check_header(path)
        with (
            SQLiteStore(path, warn=lambda _: None),
            contextlib.closing(sqlite3.connect(path)) as conn,
        ):
            rows = conn.execute("PRAGMA quick_check").fetchall()
    except StoreError as exc:
        return str(exc)
    except sqlite3.Error as exc:
        return str(translate(exc, path))
    problems = [str(row[0]) for row in rows if row[0] != "ok"]
    return "; ".join(problems[:3]) or None


def salvage(path: Path, *, now: float | None = None) -> Salvaged:
    """Copy every readable session and event of the store at `path` into a new store there.

    The damaged file (with its write-ahead log) moves to `<name>.broken-<UTC time>`.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    broken = path.with_name(f"{path.name}.broken-{stamp}")
    with tempfile.TemporaryDirectory(prefix="kestrel-repair-", dir=path.parent) as work:
        scratch = Path(work)
        copy = scratch / "damaged.db"
        for suffix in ("", *_SIDE_FILES):
            if Path(f"{path}{suffix}").exists():
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        sources = [_by_rows(copy, scratch / "rows.db")]
        if (recovered := _by_recover(copy, scratch / "recovered.db")) is not None:
            sources.append(recovered)
        fresh = scratch / "sessions.db"
        SQLiteStore(fresh, warn=lambda _: None).close()
        sessions, events = _fill(fresh, sources)
        for suffix in ("", *_SIDE_FILES):
            if Path(f"{path}{suffix}").exists():
                os.replace(f"{path}{suffix}", f"{broken}{suffix}")
        os.replace(fresh, path)
    return Salvaged(sessions=sessions, events=events, broken=broken)


def _by_recover(damaged: Path, target: Path) -> Path | None:
    """SQLite's `.recover` into `target`; None where the tool is missing, lacks `.recover`
    (builds without the page table), or fails."""
    tool = shutil.which("sqlite3")
    if tool is None:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        dump = subprocess.run(
            [tool, str(damaged), ".recover"], capture_output=True, timeout=600, check=False
        )
        if dump.returncode != 0:
            return None
        load = subprocess.run(
            [tool, str(target)], input=dump.stdout, capture_output=True, timeout=600, check=False
        )
        if target.exists() and load.returncode == 0:
            return target
    return None


def _whole_pages(damaged: Path) -> None:
    """Cut a torn file back to whole pages and make its header say how many there are: SQLite
    then reads every page that survived, instead of calling the whole file malformed."""
    with damaged.open("r+b") as file:
        header = file.read(100)
        if len(header) < 100:
            return
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if page_size < 512:
            return
        pages = damaged.stat().st_size // page_size
        file.truncate(pages * page_size)
        file.seek(28)
        file.write(pages.to_bytes(4, "big"))


def _by_rows(damaged: Path, target: Path) -> Path:
    """The damaged file's rows copied one by one into `target`: a scan of each table up to its
    first bad page, then each event the sessions table promises, looked up on its own."""
    with contextlib.suppress(OSError):
        _whole_pages(damaged)
    out = sqlite3.connect(target)
    try:
        for table, columns in _TABLES.items():
            out.execute(f"CREATE TABLE {table} ({columns})")
        with contextlib.suppress(sqlite3.Error):
            source = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True)
            try:
                _copy_rows(source, out)
            finally:
                source.close()
        out.commit()
    finally:
        out.close()
    return target


def _copy_rows(source: sqlite3.Connection, out: sqlite3.Connection) -> None:
    sessions = _scan(source, f"SELECT {_TABLES['sessions']} FROM sessions")  # noqa: S608
    out.executemany("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", sessions)
    events = _scan(source, f"SELECT {_TABLES['events']} FROM events")  # noqa: S608
    found = {(row[0], row[1]) for row in events}
    lookup = f"SELECT {_TABLES['events']} FROM events WHERE session_id = ? AND seq = ?"  # noqa: S608
    for row in sessions:
        session_id, last_seq = row[0], row[7]
        if not isinstance(last_seq, int):
            continue
        for seq in range(1, last_seq + 1):
            if (session_id, seq) in found:
                continue
            with contextlib.suppress(sqlite3.Error):
                if (event := source.execute(lookup, (session_id, seq)).fetchone()) is not None:
                    events.append(event)
    out.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", events)


def _scan(source: sqlite3.Connection, sql: str) -> list[tuple[object, ...]]:
    """The rows `sql` yields before the first error."""
    rows: list[tuple[object, ...]] = []
    with contextlib.suppress(sqlite3.Error):
        rows.extend(source.execute(sql))
    return rows


def _fill(fresh: Path, sources: list[Path]) -> tuple[int, int]:
    """Merge the sources' events and sessions into `fresh`; return how many of each it holds."""
    conn = sqlite3.connect(fresh, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for source in sources:
            conn.execute("ATTACH DATABASE ? AS src", (str(source),))
            for statement in _copy_statements(conn):
                with contextlib.suppress(sqlite3.Error):
                    conn.execute(statement)
            conn.execute("COMMIT")
            conn.execute("DETACH DATABASE src")
            conn.execute("BEGIN")
        for statement in _SETTLE:
            conn.execute(statement)
        conn.execute("COMMIT")
        sessions = int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        events = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        conn.close()
    return sessions, events


def _copy_statements(conn: sqlite3.Connection) -> list[str]:
    """The copies that apply to the attached source: its tables, and `.recover`'s lost rows."""
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM src.sqlite_master")}
    statements = []
    if "events" in tables:
        statements.append(
            "INSERT OR IGNORE INTO events SELECT session_id, seq, at, type, json FROM src.events"
            " WHERE typeof(seq) = 'integer' AND seq > 0 AND json_valid(json)"
            " AND json_extract(json, '$.seq') = seq"
            " AND json_extract(json, '$.session_id') = session_id"
        )
    if "lost_and_found" in tables:
        # Rows `.recover` found on pages no table claims; an event row has five fields.
        statements.append(
            "INSERT OR IGNORE INTO events SELECT c0, c1, c2, c3, c4 FROM src.lost_and_found"
            " WHERE nfield = 5 AND typeof(c1) = 'integer' AND c1 > 0 AND json_valid(c4)"
            " AND json_extract(c4, '$.seq') = c1 AND json_extract(c4, '$.session_id') = c0"
        )
    if "sessions" in tables:
        statements.append(
            f"INSERT OR IGNORE INTO sessions ({_TABLES['sessions']})"  # noqa: S608
            f" SELECT {_TABLES['sessions']} FROM src.sessions WHERE typeof(id) = 'text'"
            " AND typeof(last_seq) = 'integer'"
        )
    return statements


_SETTLE = (
    # A session whose row was lost but whose first event survived is rebuilt from that event.
    "INSERT OR IGNORE INTO sessions (id, created_at, updated_at, task, cwd, model, status,"
    " last_seq) SELECT session_id, at, at, json_extract(json, '$.event.task'),"
    " json_extract(json, '$.event.cwd'), json_extract(json, '$.event.model'), 'running', 1"
    " FROM events WHERE seq = 1 AND type = 'session_started'",
    # Events of a session that could not be rebuilt have nothing to belong to.
    "DELETE FROM events WHERE session_id NOT IN (SELECT id FROM sessions)",
    "DELETE FROM sessions WHERE id NOT IN (SELECT session_id FROM events)",
    # The next append must not reuse a number, and the status follows the last event that sets it.
    "UPDATE sessions SET"
    " last_seq = max(last_seq, (SELECT MAX(seq) FROM events WHERE session_id = id)),"
    " updated_at = max(updated_at, (SELECT MAX(at) FROM events WHERE session_id = id)),"
    " status = COALESCE((SELECT CASE type WHEN 'session_finished'"
    "  THEN json_extract(json, '$.event.reason') ELSE 'running' END FROM events"
    "  WHERE session_id = id AND type IN ('session_finished', 'session_resumed')"
    "  ORDER BY seq DESC LIMIT 1), status)",
)
