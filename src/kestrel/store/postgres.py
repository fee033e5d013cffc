"""The event log in PostgreSQL, for Kestrel processes on several machines sharing one log.

Same rows, ordering and durability as the SQLite log (`append` returns once the server has
committed), with three differences:

- **One writer per session at a time, by the database.** An append's first statement updates
  its session's row, taking the next number and a lock on the row until the transaction ends,
  so concurrent appends to one session, from any process on any machine, are put in a line by
  the server: each gets its own number, none is lost, and the numbers have no gaps. The primary
  key `(session_id, seq)` refuses any duplicate besides. Two processes that both start the same
  session race on the session row's primary key: exactly one wins and the other is refused
  (`ValueError`, as in every store). Not a lease that admits only one process per session:
  the answers a session waits for (`approval_decided`, `cancel_requested`) are appended by other
  processes by design; keeping a dead worker from writing on belongs to whatever hands sessions
  to workers.
- **Followers are woken by LISTEN/NOTIFY** (`postgres_listen`), from any machine, and poll at
  `poll_interval_s` in case a wake-up is missed.
- **Faults are `StoreUnavailable`** (`postgres_faults`) when the server cannot be reached or the
  connection breaks; the next call connects again, and a call that finds its idle connection
  dead (the server restarted) is tried once more on a fresh one.

An event row that cannot be decoded (an event type from a newer Kestrel sharing the database)
is skipped with one warning, and left where it is for the Kestrel that wrote it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from kestrel.store import postgres_tombstones as graves
from kestrel.store import tombstones
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
from kestrel.store.postgres_faults import MISSING_DRIVER, CommitUnknown, log_lost, where
from kestrel.store.sqlite_rows import decode, storable
from kestrel.store.tombstones import ARCHIVED, SessionArchived, StoredRow, Tombstone, restore_with

if TYPE_CHECKING:
    from kestrel.protocol.events import Event, Record
    from kestrel.store.postgres_link import Conn

_SESSIONS = (
    "SELECT id, created_at, updated_at, task, cwd, model, last_seq, status, cost_usd,"
    " parent_session_id, turns, cost_known FROM kestrel_sessions ORDER BY created_at DESC, n DESC"
)
_SPENT_SINCE = (
    "SELECT COALESCE(SUM(cost_usd), 0), COALESCE(SUM(tokens), 0), COUNT(*) FROM kestrel_events"
    " WHERE cost_usd IS NOT NULL AND at >= %s"
)
_RESOLVE = (
    "SELECT id FROM kestrel_sessions WHERE id = %(id)s OR id LIKE %(like)s"
    " ORDER BY id <> %(id)s, id LIMIT %(limit)s"
)
_START = (
    "INSERT INTO kestrel_sessions (id, created_at, updated_at, task, cwd, model, status,"
    " last_seq, parent_session_id) VALUES (%s, %s, %s, %s, %s, %s, %s, 1, %s)"
    " ON CONFLICT (id) DO NOTHING RETURNING id"
)
_NEXT = (
    "UPDATE kestrel_sessions SET last_seq = last_seq + 1, updated_at = %s,"
    " cost_usd = cost_usd + %s, turns = turns + %s, cost_known = cost_known AND %s"
    " WHERE id = %s RETURNING last_seq, status"
)
_STATUS = "UPDATE kestrel_sessions SET status = %s WHERE id = %s"
_INSERT = (
    "INSERT INTO kestrel_events (session_id, seq, at, type, json, cost_usd, tokens)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_SHOWN = 5
"""How many matches an ambiguous prefix names."""


class PostgresStore:
    """An `EventStore` in a PostgreSQL database that any number of processes and machines share.

    `url` is a libpq connection string (`postgresql://user@host:5432/kestrel`). Opening the store
    connects once, creating the tables in an empty database; every failure underneath is a
    `StoreError` subclass (`StoreUnavailable`, `StoreFull`, `SessionLogLost`, `SessionBusy`).
    An archived session is brought back by `restorer` the first time it is read or appended to
    (see `kestrel.store.tombstones`).
    """

    def __init__(
        self,
        url: str,
        *,
        poll_interval_s: float = 0.5,
        connect_timeout_s: float = 5.0,
        busy_timeout_s: float = 10.0,
        outage_wait_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
        restorer: tombstones.Restorer | None = None,
    ) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError(MISSING_DRIVER) from None
        from kestrel.store.postgres_link import Link
        from kestrel.store.postgres_listen import Listener
        from kestrel.store.postgres_schema import migrate

        self._place = where(url)
        self._poll_s = poll_interval_s
        self._outage_wait_s = outage_wait_s
        self._clock = clock
        self._warn = warn or _to_stderr
        self._notifier = Notifier()
        self._restorer = restorer
        self._written: set[str] = set()
        """Sessions this store has appended to: their rows vanishing means the log was lost."""
        self._warned: set[tuple[str, int]] = set()
        self._warned_lock = threading.Lock()
        # Appends and reads use separate connections so a reader never waits behind a writer
        # that is itself waiting for another process's lock on the same session. An append
        # waits at most `busy_timeout_s` for that lock, and the server ends a transaction left
        # open (by a process stopped mid-append) so that it cannot hold a session for good.
        held = {
            "lock_timeout": f"{round(busy_timeout_s * 1000)}ms",
            "idle_in_transaction_session_timeout": f"{round(busy_timeout_s * 3000)}ms",
        }
        # Once reached, a server that goes away is waited for (`postgres_link`), for up to
        # `outage_wait_s`: a session then pauses through a restart rather than ending.
        self._writer = Link(
            url,
            self._place,
            connect_timeout_s=connect_timeout_s,
            autocommit=False,
            settings=held,
            outage_wait_s=outage_wait_s,
        )
        self._reader = Link(
            url,
            self._place,
            connect_timeout_s=connect_timeout_s,
            autocommit=True,
            outage_wait_s=outage_wait_s,
        )
        self._listener = Listener(self._reader, self._notifier)
        try:
            self._writer.run(lambda conn: migrate(conn, self._place))
        except BaseException:
            self._writer.close()
            raise

    @property
    def place(self) -> str:
        """The server and database, as messages name them (never with a password)."""
        return self._place

    def append(self, session_id: str, event: Event) -> Record:
        """Commit `event` as the session's next record, then wake subscribers and return it."""
        from kestrel.protocol.events import SessionStarted

        starting = isinstance(event, SessionStarted)
        if starting:
            check_append(session_id, event, exists=False)  # its id, before touching the server
        at = self._clock()
        try:
            record = self._write(session_id, event, at, starting)
        except SessionArchived as exc:
            restore_with(self._restorer, self, exc.tombstone)
            record = self._write(session_id, event, at, starting)
        except CommitUnknown:
            if not self._outage_wait_s:
                raise
            record = self._landed(session_id, event, at) or self._write(
                session_id, event, at, starting
            )
        self._written.add(session_id)
        self._notifier.notify(session_id)
        return record

    def _write(self, session_id: str, event: Event, at: float, starting: bool) -> Record:
        return self._writer.run(
            lambda conn: self._append_in(conn, session_id, event, at),
            session_id=None if starting else session_id,
            commit=True,
        )

    def _landed(self, session_id: str, event: Event, at: float) -> Record | None:
        """The record of an append whose commit broke, when it did land (its session's last
        record carries its time and type: one process writes a session at a time); None when
        it did not. The read waits for the server like any other."""
        row = self._reader.run(
            lambda conn: conn.execute(
                "SELECT seq, json FROM kestrel_events WHERE session_id = %s"
                " ORDER BY seq DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        )
        if row is None:
            return None
        last = decode(session_id, int(row[0]), str(row[1]))
        return last if last.at == at and last.event.type == event.type else None

    def _append_in(self, conn: Conn, session_id: str, event: Event, at: float) -> Record:
        from kestrel.protocol.codec import record_to_json
        from kestrel.protocol.events import Record, SessionStarted, spent_by
        from kestrel.store.postgres_schema import CHANNEL

        status = None
        if isinstance(event, SessionStarted):
            seq = self._start_in(conn, session_id, event, at)
        else:
            seq, status = self._next_in(conn, session_id, event, at)
        record = Record(session_id=session_id, seq=seq, at=at, event=event)
        cost = tokens = None
        if (usage := spent_by(event)) is not None:
            cost = usage.cost_usd
            tokens = usage.total_input_tokens + usage.output_tokens
        text = storable(record_to_json(record))
        with conn.pipeline():  # one round trip for the rest
            conn.execute(_INSERT, (session_id, seq, at, event.type, text, cost, tokens))
            if status is not None:
                conn.execute(_STATUS, (status, session_id))
            # Delivered to listeners when, and only if, the transaction commits.
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{seq} {session_id}"))
        return record

    def _start_in(self, conn: Conn, session_id: str, event: Event, at: float) -> int:
        from kestrel.protocol.events import SessionStarted

        assert isinstance(event, SessionStarted)
        fields = (_plain(event.task), _plain(event.cwd), _plain(event.model))
        parent = event.parent_session_id
        won = conn.execute(_START, (session_id, at, at, *fields, RUNNING, parent)).fetchone()
        check_append(session_id, event, exists=won is None)
        return 1

    def _next_in(
        self, conn: Conn, session_id: str, event: Event, at: float
    ) -> tuple[int, str | None]:
        """Take the session's next number, holding its row until commit; the session's new
        status, when the event changes it."""
        from kestrel.protocol.events import ModelCompleted, spent_by

        usage = spent_by(event)
        cost, priced = (usage.cost_usd, usage.priced) if usage else (0.0, True)
        turn = int(isinstance(event, ModelCompleted))
        row = conn.execute(_NEXT, (at, cost, turn, priced, session_id)).fetchone()
        if row is None and session_id in self._written:
            raise log_lost(self._place, session_id)
        check_append(session_id, event, exists=row is not None)
        assert row is not None
        if row[1] == ARCHIVED and (grave := graves.find(conn, session_id)) is not None:
            raise SessionArchived(grave)  # rolled back: restored first, then tried again
        status = status_after(str(row[1]), event)
        return int(row[0]), None if status == row[1] else status

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """Every record of the session after `after_seq`; an unknown session has none.

        A row that cannot be decoded is skipped, with one warning naming it.
        """
        from kestrel.protocol.codec import DecodeError

        rows = self._reader.run(
            lambda conn: conn.execute(
                "SELECT seq, json FROM kestrel_events WHERE session_id = %s AND seq > %s"
                " ORDER BY seq",
                (session_id, after_seq),
            ).fetchall()
        )
        if not rows and self._restored(session_id):
            return self.read(session_id, after_seq)
        records: list[Record] = []
        for seq, text in rows:
            try:
                records.append(decode(session_id, int(seq), str(text)))
            except DecodeError as exc:
                self._skipped(session_id, int(seq), exc)
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
        return self._reader.run(lambda conn: graves.rows(conn, session_id))

    def tombstone(self, session_id: str) -> Tombstone | None:
        """The session's tombstone, or None when it is not archived."""
        return self._reader.run(lambda conn: graves.find(conn, session_id))

    def bury(self, tombstone: Tombstone) -> None:
        """Swap the session's rows for its tombstone (`ArchiveConflict` if it moved on)."""
        self._writer.run(lambda conn: graves.bury(conn, tombstone), commit=True)

    def reinstate(self, tombstone: Tombstone, rows: Sequence[StoredRow]) -> bool:
        """Put an archived session's rows back; False when another process did first."""
        return self._writer.run(lambda conn: graves.reinstate(conn, tombstone, rows), commit=True)

    def _skipped(self, session_id: str, seq: int, exc: Exception) -> None:
        with self._warned_lock:
            if (session_id, seq) in self._warned:
                return
            self._warned.add((session_id, seq))
        why = str(exc).removeprefix(f"session {session_id!r}, seq {seq}: ").splitlines()[0]
        self._warn(f"warning: session {session_id!r}, seq {seq} cannot be read ({why}); skipped")

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """Records after `after_seq`, then new ones as any process appends them."""
        self._listener.start()
        return follow(self.read, self._notifier, session_id, after_seq, self._poll_s)

    def listening(self, timeout: float = 5.0) -> bool:
        """Whether notifications from other processes arrive, waiting up to `timeout` for it."""
        self._listener.start()
        return self._listener.wait_ready(timeout)

    def sessions(self) -> Sequence[SessionSummary]:
        """Every session, most recently created first."""
        rows = self._reader.run(lambda conn: conn.execute(_SESSIONS).fetchall())
        return [
            SessionSummary(
                session_id=str(row[0]),
                created_at=float(row[1]),
                updated_at=float(row[2]),
                task=str(row[3]),
                cwd=str(row[4]),
                model=str(row[5]),
                events=int(row[6]),
                status=str(row[7]),
                cost_usd=float(row[8]),
                parent_session_id=row[9],
                turns=int(row[10]),
                cost_known=bool(row[11]),
            )
            for row in rows
        ]

    def spent_since(self, since: float) -> Spend:
        """What every session's model calls recorded at or after `since` cost, in one query."""
        row = self._reader.run(lambda conn: conn.execute(_SPENT_SINCE, (since,)).fetchone())
        assert row is not None  # an aggregate always has a row
        return Spend(cost_usd=float(row[0]), tokens=int(row[1]), calls=int(row[2]))

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The number of the last event of each session named (one cheap query for all)."""
        rows = self._reader.run(
            lambda conn: conn.execute(
                "SELECT id, last_seq FROM kestrel_sessions WHERE id = ANY(%s)",
                (list(session_ids),),
            ).fetchall()
        )
        return {str(sid): int(seq) for sid, seq in rows}

    def resolve(self, id_or_prefix: str) -> str:
        """The one session id equal to, or else starting with, the argument."""
        like = id_or_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        params = {"id": id_or_prefix, "like": like, "limit": _SHOWN + 1}
        rows = self._reader.run(lambda conn: conn.execute(_RESOLVE, params).fetchall())
        matches = [str(row[0]) for row in rows]
        return choose(id_or_prefix, matches[:_SHOWN], more=len(matches) > _SHOWN)

    def close(self) -> None:
        """Stop listening and close both connections."""
        self._listener.stop()
        self._writer.close()
        self._reader.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _plain(text: str) -> str:
    """Text a PostgreSQL column holds: no NUL, no lone surrogate (the event's JSON keeps both)."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _to_stderr(message: str) -> None:
    print(f"kestrel: {message}", file=sys.stderr)
