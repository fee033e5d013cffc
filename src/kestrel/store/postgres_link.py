"""One connection to the PostgreSQL store, used by one thread at a time, connected again on the
next call after it breaks.

A server restart or a killed backend leaves an idle connection dead without anyone noticing
until it is used. A call that finds its reused connection dead before anything was committed
runs once more on a fresh one, so a restart between two calls costs the caller nothing; a
connection that breaks while a transaction commits is never retried (the server may have
committed it), and a server that cannot be reached fails the call with `StoreUnavailable`.

With `outage_wait_s`, a server that goes away after the link first reached it is waited for:
the call is tried again, with growing pauses, for up to that long before it fails (a session
pauses through a database restart or fail-over instead of ending). A server that was never
reached fails at once, so a wrong URL is reported without a wait. A broken commit is never
tried again here: the store decides (`CommitUnknown`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from kestrel.store.postgres_faults import (
    CommitUnknown,
    StoreUnavailable,
    commit_unknown,
    translate,
    unreachable,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    Conn: TypeAlias = psycopg.Connection[TupleRow]
    """A connection whose rows are tuples."""

T = TypeVar("T")
logger = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.2
LONGEST_PAUSE_S = 2.0


class Link:
    """A lazily opened connection to `url` behind a lock; `run` is the only way to use it."""

    def __init__(
        self,
        url: str,
        place: str,
        *,
        connect_timeout_s: float,
        autocommit: bool,
        settings: dict[str, str] | None = None,
        outage_wait_s: float = 0.0,
    ) -> None:
        self._url = url
        self._options = " ".join(f"-c {name}={value}" for name, value in (settings or {}).items())
        self._place = place
        self._timeout = max(1, round(connect_timeout_s))  # libpq takes whole seconds
        self._autocommit = autocommit
        self._lock = threading.Lock()
        self._conn: Conn | None = None
        self._outage_wait_s = outage_wait_s
        self._reached = False

    def connect(self, session_id: str | None = None) -> Conn:
        """A new connection, or `StoreUnavailable` (naming `session_id`) when the server cannot
        be reached."""
        import psycopg

        try:
            conn = psycopg.connect(
                self._url,
                autocommit=self._autocommit,
                connect_timeout=self._timeout,
                application_name="kestrel",
                options=self._options,
            )
        except psycopg.Error as exc:
            raise unreachable(self._place, exc, session_id) from None
        self._reached = True
        return conn

    def run(
        self,
        work: Callable[[Conn], T],
        *,
        session_id: str | None = None,
        commit: bool = False,
    ) -> T:
        """`work(connection)` (then a commit, when asked), with errors as `StoreError`s; through
        an outage of up to `outage_wait_s` once the server was reached."""
        waited, pause = 0.0, FIRST_PAUSE_S
        while True:
            try:
                return self._run(work, session_id=session_id, commit=commit)
            except CommitUnknown:
                raise
            except StoreUnavailable as exc:
                if not self._reached or waited >= self._outage_wait_s:
                    raise
                if waited == 0.0:
                    logger.warning("%s; waiting up to %g s for it", exc, self._outage_wait_s)
                time.sleep(pause)
                waited += pause
                pause = min(pause * 2, LONGEST_PAUSE_S)

    def _run(
        self,
        work: Callable[[Conn], T],
        *,
        session_id: str | None,
        commit: bool,
    ) -> T:
        import psycopg

        with self._lock:
            for attempt in range(2):
                fresh = self._conn is None
                if self._conn is None:
                    self._conn = self.connect(session_id)
                conn = self._conn
                try:
                    result = work(conn)
                except psycopg.Error as exc:
                    lost = self._settle(conn)
                    if lost and not fresh and attempt == 0:
                        continue  # A dead idle connection: nothing ran, try a fresh one.
                    raise translate(exc, self._place, session_id, lost=lost) from None
                except BaseException:
                    self._settle(conn)
                    raise
                if commit:
                    self._commit(conn, session_id)
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _commit(self, conn: Conn, session_id: str | None) -> None:
        import psycopg

        try:
            conn.commit()
        except psycopg.Error as exc:
            if self._settle(conn):
                raise commit_unknown(self._place, session_id, exc) from None
            raise translate(exc, self._place, session_id) from None

    def _settle(self, conn: Conn) -> bool:
        """Roll back what a failed call left open; drop a broken connection. True if broken."""
        import psycopg

        if conn.broken or conn.closed:
            self._drop()
            return True
        try:
            conn.rollback()
        except psycopg.Error:
            self._drop()
            return True
        return False

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close the connection; a later `run` would open a new one."""
        with self._lock:
            self._drop()
