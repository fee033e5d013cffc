"""The local event store: one SQLite database in WAL mode, safe across threads and processes.

Durability: `append` commits before it returns. In WAL mode a committed transaction is in the
operating system's hands, so it survives the process being killed (even `kill -9`) at any moment.
With `synchronous="NORMAL"` (the default) the last commits before a power loss or an operating
system crash may be lost; `synchronous="FULL"` syncs the log to disk on every commit, so they
survive that too, at the cost of one disk flush per event.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from kestrel.store import quarantine, tombstones
from kestrel.store import sqlite_queries as queries
from kestrel.store import sqlite_tombstones as graves
from kestrel.store._common import (
    RUNNING,
    Notifier,
    StoreError,
    check_append,
    choose,
    follow,
    status_after,
)
from kestrel.store.base import SessionSummary, Spend
from kestrel.store.sqlite_faults import (
    check_header,
    check_same_file,
    guarded,
    identity,
    rollback,
    session_lost,
    translate,
)
from kestrel.store.sqlite_rows import decode as _decode
from kestrel.store.sqlite_rows import storable as _storable
from kestrel.store.tombstones import ARCHIVED, SessionArchived, StoredRow, Tombstone, restore_with

if TYPE_CHECKING:
    # Imported where used, so that listing sessions does not build the event types.
    from kestrel.protocol.events import Event, Record

STORE_SCHEMA_VERSION = 1
"""The layout of the database, kept in `PRAGMA user_version`; not the event schema version."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        task TEXT NOT NULL,
        cwd TEXT NOT NULL,
        model TEXT NOT NULL,
        status TEXT NOT NULL,
        last_seq INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS events (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL CHECK (seq > 0),
        at REAL NOT NULL,
        type TEXT NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS sessions_by_created ON sessions (created_at)",
)

_EVERY_OPEN = (
    quarantine.QUARANTINE_SCHEMA,
    graves.TOMBSTONE_SCHEMA,
    *queries.SPEND_INDEXES,
)


class SQLiteStore:
    """An `EventStore` in one SQLite file; several processes may share the file.

    Every failure underneath is a `StoreError` subclass: `StoreDamaged` for a file that is not a
    whole database (checked on open, and on any read that finds a bad page), `StoreFull` for an
    append that found no room (it left nothing behind), `SessionLogLost` for an append to a
    session whose log was deleted, or whose file was deleted or replaced, since this store last
    wrote to it. An event row that cannot be decoded is moved to the `quarantine` table, with
    one warning through `warn`, and skipped. An archived session is brought back by `restorer`
    the first time it is read or appended to (see `kestrel.store.tombstones`).
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        poll_interval_s: float = 0.05,
        busy_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
        restorer: tombstones.Restorer | None = None,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._path = path
        self._poll_s = poll_interval_s
        self._clock = clock
        self._warn = warn or _to_stderr
        self._notifier = Notifier()
        self._restorer = restorer
        # Sessions this store has appended to: their rows vanishing means the log was lost.
        self._written: set[str] = set()
        with guarded(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        check_header(path)
        # Appends and reads use separate connections so a reader never waits behind a writer
        # that is itself waiting for another process to finish its transaction.
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer = self._connect(synchronous, busy_timeout_s)
        try:
            with guarded(path):
                self._migrate()
                self._reader = self._connect(synchronous, busy_timeout_s)
        except BaseException:
            self._writer.close()
            raise
        self._opened = identity(path)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def _connect(self, synchronous: str, busy_timeout_s: float) -> sqlite3.Connection:
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so nothing commits implicitly.
            conn = sqlite3.connect(
                self._path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the event store {self._path}: {exc}", path=str(self._path)
            ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, self._path) from exc
        return conn

    def _migrate(self) -> None:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > STORE_SCHEMA_VERSION:
                raise StoreError(
                    f"the event store {self._path} has schema version {version}, but this "
                    f"Kestrel reads up to version {STORE_SCHEMA_VERSION}; upgrade Kestrel",
                    path=str(self._path),
                )
            if version < STORE_SCHEMA_VERSION:
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
            for statement in _EVERY_OPEN:
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise

    def append(self, session_id: str, event: Event) -> Record:
        """Commit `event` as the session's next record, then wake subscribers and return it.

        The append is one transaction: when it fails (`StoreFull`, ...) nothing of it remains.
        """
        try:
            return self._append(session_id, event)
        except SessionArchived as exc:
            restore_with(self._restorer, self, exc.tombstone)
        return self._append(session_id, event)

    def _append(self, session_id: str, event: Event) -> Record:
        # An error names the session it stopped, unless the session never began.
        stopped = None if event.type == "session_started" else session_id
        with self._write_lock, guarded(self._path, stopped):
            if session_id in self._written:
                check_same_file(self._path, self._opened, session_id)
            conn = self._writer
            # IMMEDIATE takes the write lock up front, so two processes cannot read the same
            # last_seq and both claim the next number.
            conn.execute("BEGIN IMMEDIATE")
            try:
                record = self._append_locked(conn, session_id, event)
                conn.execute("COMMIT")
            except BaseException:
                # SQLite has already rolled back after some errors (a full disk): no second try.
                rollback(conn)
                raise
            self._written.add(session_id)
        self._notifier.notify(session_id)
        return record

    def _append_locked(self, conn: sqlite3.Connection, session_id: str, event: Event) -> Record:
        from kestrel.protocol.codec import record_to_json
        from kestrel.protocol.events import Record, SessionStarted

        row = conn.execute(
            "SELECT last_seq, status FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None and session_id in self._written:
            raise session_lost(self._path, session_id)
        check_append(session_id, event, exists=row is not None)
        if row is not None and row[1] == ARCHIVED and (grave := graves.find(conn, session_id)):
            raise SessionArchived(grave)
        at = self._clock()
        if isinstance(event, SessionStarted):
            seq = 1
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, task, cwd, model, last_seq,"
                " status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, at, at, event.task, event.cwd, event.model, seq, RUNNING),
            )
        else:
            seq = int(row[0]) + 1
            conn.execute(
                "UPDATE sessions SET last_seq = ?, updated_at = ?, status = ? WHERE id = ?",
                (seq, at, status_after(str(row[1]), event), session_id),
            )
        record = Record(session_id=session_id, seq=seq, at=at, event=event)
        conn.execute(
            "INSERT INTO events (session_id, seq, at, type, json) VALUES (?, ?, ?, ?, ?)",
            (session_id, seq, at, event.type, _storable(record_to_json(record))),
        )
        return record

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """Every record of the session after `after_seq`; an unknown session has none.

        A row that cannot be decoded is quarantined, with a warning, and left out.
        """
        from kestrel.protocol.codec import DecodeError

        with self._read_lock, guarded(self._path):
            rows = self._reader.execute(
                "SELECT seq, json FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after_seq),
            ).fetchall()
        if not rows and self._restored(session_id):
            return self.read(session_id, after_seq)
        records: list[Record] = []
        unreadable: list[tuple[str, int, str, str]] = []
        for seq, text in rows:
            try:
                records.append(_decode(session_id, int(seq), text))
            except DecodeError as exc:
                reason = str(exc).removeprefix(f"session {session_id!r}, seq {seq}: ")
                unreadable.append((session_id, int(seq), reason, quarantine.brief(text, reason)))
        if unreadable:
            self._set_aside(unreadable)
        return records

    def _restored(self, session_id: str) -> bool:
        """Whether the session was archived and is now back (the seam of transparent restore:
        every reader, follower and writer of a session goes through `read` or `append`)."""
        grave = self.tombstone(session_id)
        if grave is not None:
            restore_with(self._restorer, self, grave)
        return grave is not None

    def rows(self, session_id: str) -> Sequence[StoredRow]:
        """Every event row of the session, exactly as stored (for archiving)."""
        with self._read_lock, guarded(self._path):
            return graves.rows(self._reader, session_id)

    def tombstone(self, session_id: str) -> Tombstone | None:
        """The session's tombstone, or None when it is not archived."""
        with self._read_lock, guarded(self._path):
            return graves.find(self._reader, session_id)

    def bury(self, tombstone: Tombstone) -> None:
        """Swap the session's rows for its tombstone (`ArchiveConflict` if it moved on)."""
        with self._write_lock, guarded(self._path):
            graves.bury(self._writer, tombstone)

    def reinstate(self, tombstone: Tombstone, rows: Sequence[StoredRow]) -> bool:
        """Put an archived session's rows back; False when another process did first."""
        with self._write_lock, guarded(self._path):
            return graves.reinstate(self._writer, tombstone, rows)

    def _set_aside(self, rows: Sequence[tuple[str, int, str, str]]) -> None:
        """Quarantine unreadable `(session, seq, reason, brief)` rows and say so, once each; a
        store that cannot be written still skips them."""
        try:
            with self._write_lock, guarded(self._path):
                quarantine.set_aside(self._writer, [r[:3] for r in rows], self._clock())
        except StoreError as exc:
            self._warn(f"warning: could not set unreadable events aside: {exc}")
        for session_id, seq, _, why in rows:
            self._warn(
                f"warning: session {session_id!r}, seq {seq} cannot be read ({why}); "
                "it was quarantined and is skipped"
            )

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run a read that uses SQLite's JSON functions: a row that is not JSON stops those,
        so such rows are quarantined first, and the query tried again."""
        with guarded(self._path):
            try:
                with self._read_lock:
                    return list(self._reader.execute(sql, params).fetchall())
            except sqlite3.OperationalError:
                with self._read_lock:
                    bad = quarantine.invalid_json(self._reader)
                if not bad:
                    raise
            self._set_aside([(*row, row[2]) for row in bad])
            with self._read_lock:
                return list(self._reader.execute(sql, params).fetchall())

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """Records after `after_seq`, then new ones: woken in-process, polled across processes."""
        return follow(self.read, self._notifier, session_id, after_seq, self._poll_s)

    def sessions(self) -> Sequence[SessionSummary]:
        """Every session, most recently created first; an archived one as its tombstone says."""
        rows: list[Any] = self._query(queries.SESSIONS_WITH_COST)
        found = [queries.summary(row) for row in rows]
        if not any(s.status == ARCHIVED for s in found):
            return found
        with self._read_lock, guarded(self._path):
            return tombstones.listed(found, graves.every(self._reader))

    def spent_since(self, since: float) -> Spend:
        """What every session's model calls recorded at or after `since` cost, in one query."""
        row: Any = self._query(queries.SPENT_SINCE, (since,))[0]
        return Spend(cost_usd=float(row[0]), tokens=int(row[1]), calls=int(row[2]))

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The number of the last event of each session named (one cheap query for all)."""
        marks = ",".join("?" * len(session_ids))
        with self._read_lock, guarded(self._path):
            rows = self._reader.execute(
                f"SELECT id, last_seq FROM sessions WHERE id IN ({marks})",  # noqa: S608
                tuple(session_ids),
            ).fetchall()
        return {str(sid): int(seq) for sid, seq in rows}

    def resolve(self, id_or_prefix: str) -> str:
        """The one session id equal to, or else starting with, the argument."""
        shown = 5
        with self._read_lock, guarded(self._path):
            rows = self._reader.execute(
                "SELECT id FROM sessions WHERE id = ?1 OR substr(id, 1, length(?1)) = ?1 "
                "ORDER BY id != ?1, id LIMIT ?2",
                (id_or_prefix, shown + 1),
            ).fetchall()
        matches = [str(row[0]) for row in rows]
        return choose(id_or_prefix, matches[:shown], more=len(matches) > shown)

    def close(self) -> None:
        """Close both connections; the store cannot be used afterwards."""
        with self._write_lock, self._read_lock, contextlib.suppress(sqlite3.Error):
            # Closing checkpoints the write-ahead log; on a full disk that waits for next time.
            self._reader.close()
            self._writer.close()

    def quarantined(self) -> int:
        """How many unreadable events this store has set aside."""
        with self._read_lock, guarded(self._path):
            return quarantine.count(self._reader)

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _to_stderr(message: str) -> None:
    print(f"kestrel: {message}", file=sys.stderr)
