"""The server's tables in PostgreSQL, for any number of `kestrel serve` processes behind a load
balancer: the `Database` of `sql`, over the event store's connection handling.

The tables live in their own schema, `kestrel_server`, beside the event log's `kestrel_` tables
and the durable engine's schema in the same database, so their names and SQL are the SQLite
files' own. Connections come from a small pool of the event store's `Link`s: a connection found
dead (a restarted server) is replaced and the call tried again when nothing was committed, and
every fault is a `StoreError` (`StoreUnavailable` while the server cannot be reached). A call
does not wait through an outage: the API answers 503 at once and the client tries again.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from kestrel.server.sql import Dialect, Result, Tx

if TYPE_CHECKING:
    from kestrel.store.postgres_link import Conn, Link

T = TypeVar("T")

SCHEMA = "kestrel_server"
"""The schema of the server's tables."""
_MIGRATE_LOCK = 0x6B657374_73727631  # "kestsrv1": one process creates the tables at a time
_LOCK_NAMESPACE = 0x6B73  # Advisory locks of `locked` are (this, crc32 of the key).
_TAKE = "SELECT true FROM (SELECT pg_advisory_lock(%s, %s)) AS taken"
_TRY = "SELECT pg_try_advisory_lock(%s, %s)"


class _PgTx:
    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> Result:
        # Server SQL never holds a literal `?` or `%`: placeholders are the only ones.
        cursor = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        names = tuple(d.name for d in cursor.description or ())
        rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        return Result(rows, names, cursor.rowcount)


class PostgresDatabase:
    """The server's tables in the PostgreSQL database at `url`, shared by every server."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, connections: int = 8, connect_timeout_s: float = 3.0) -> None:
        from kestrel.store.postgres_faults import where

        self._url = url
        self.place = where(url)
        self._timeout_s = connect_timeout_s
        self._free: list[Link] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(connections)
        self._settings = {"search_path": SCHEMA, "lock_timeout": "30s"}

    def _new_link(self, *, autocommit: bool) -> Link:
        from kestrel.store.postgres_link import Link

        return Link(
            self._url,
            self.place,
            connect_timeout_s=self._timeout_s,
            autocommit=autocommit,
            settings=self._settings,
        )

    @contextmanager
    def _link(self) -> Iterator[Link]:
        with self._slots:
            with self._lock:
                link = self._free.pop() if self._free else None
            link = link or self._new_link(autocommit=False)
            try:
                yield link
            finally:
                with self._lock:
                    self._free.append(link)

    def read(self, work: Callable[[Tx], T]) -> T:
        return self.write(work)  # A transaction either way: its reads agree with each other.

    def write(self, work: Callable[[Tx], T]) -> T:
        with self._link() as link:
            return link.run(lambda conn: work(_PgTx(conn)), commit=True)

    def migrate(self, statements: Sequence[str]) -> None:
        def create(tx: Tx) -> None:
            lock_migrations(tx)
            tx.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            for statement in statements:
                tx.execute(statement)

        self.write(create)

    @contextmanager
    def locked(self, key: str, *, wait: bool = True) -> Iterator[bool]:
        """An advisory lock held on a connection of its own for the block: every server that
        asks for `key` waits for it (at most `lock_timeout`, then `StoreError`), or without
        `wait` is told False. A connection lost meanwhile lets the lock go, as the database
        ends its session."""
        link = self._new_link(autocommit=True)
        ident = (_LOCK_NAMESPACE, zlib.crc32(key.encode()) - 2**31)
        take = _TAKE if wait else _TRY
        try:
            row = link.run(lambda conn: conn.execute(take, ident).fetchone())
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held:
                    with contextlib.suppress(Exception):
                        link.run(
                            lambda conn: conn.execute("SELECT pg_advisory_unlock(%s, %s)", ident)
                        )
        finally:
            link.close()

    def ping(self) -> None:
        self.read(lambda tx: tx.execute("SELECT 1"))

    def close(self) -> None:
        with self._lock:
            links, self._free = self._free, []
        for link in links:
            link.close()


def lock_migrations(tx: Tx) -> None:
    """Hold the server tables' migration lock until `tx` ends: two servers starting at once
    would race on the catalog (`CREATE ... IF NOT EXISTS` is not safe against itself)."""
    tx.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATE_LOCK,))


def open_database(url: str) -> PostgresDatabase:
    """The server tables' database at `url`; `StoreError` naming the extra when psycopg is
    missing."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        from kestrel.protocol.errors import StoreError
        from kestrel.store.postgres_faults import MISSING_DRIVER

        raise StoreError(MISSING_DRIVER) from None
    return PostgresDatabase(url)
