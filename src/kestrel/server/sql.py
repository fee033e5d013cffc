"""The server's own tables behind one small interface, in SQLite (one machine) or PostgreSQL
(any number of `kestrel serve` processes sharing a database: `sql_pg`).

The registry, the accounts, hosted memory and the watched pull requests write the same SQL to
either: `?` placeholders, `ON CONFLICT` upserts, `DOUBLE PRECISION` times. Each state change is
one call of `write`, which runs it in one transaction (`BEGIN IMMEDIATE` in SQLite), so a
compare-and-set such as the registry's claim is decided once for every thread, process and
machine. Rows come back as plain tuples, whatever the database.

Faults: SQLite's are `sqlite3.Error` (the stores that always wrapped them still do); PostgreSQL's
are the event store's `StoreError`s (`StoreUnavailable` while the server cannot be reached), so
the API answers either with 503.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

T = TypeVar("T")
Dialect = Literal["sqlite", "postgresql"]


@dataclass(frozen=True, slots=True)
class Result:
    """What one statement gave: its rows (all of them, fetched at once) and how many it changed."""

    rows: list[tuple[object, ...]] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    rowcount: int = 0

    def one(self) -> tuple[object, ...] | None:
        """The first row, or None."""
        return self.rows[0] if self.rows else None

    def dicts(self) -> list[dict[str, object]]:
        """The rows as dictionaries by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Tx(Protocol):
    """One transaction: statements in it commit together, or not at all."""

    def execute(self, sql: str, params: Sequence[object] = ()) -> Result:
        """Run one statement (`?` placeholders)."""
        ...


class Database(Protocol):
    """Where a server store keeps its tables."""

    dialect: Dialect

    def read(self, work: Callable[[Tx], T]) -> T:
        """`work` over a consistent view, changing nothing."""
        ...

    def write(self, work: Callable[[Tx], T]) -> T:
        """`work` in one transaction, committed when it returns (rolled back when it raises)."""
        ...

    def migrate(self, statements: Sequence[str]) -> None:
        """Create what is missing (`CREATE ... IF NOT EXISTS`), once for every process."""
        ...

    def locked(self, key: str, *, wait: bool = True) -> AbstractContextManager[bool]:
        """Hold a lock named `key` for a block (across machines where the database is shared);
        without `wait`, the block is told False, and holds nothing, while another holds it."""
        ...

    def ping(self) -> None:
        """Reach the database now, or raise."""
        ...

    def close(self) -> None:
        """Let go of the connections."""
        ...


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> Result:
        cursor = self._conn.execute(sql, tuple(params))
        names = tuple(d[0] for d in cursor.description or ())
        rows = [tuple(row) for row in cursor.fetchall()]
        return Result(rows, names, cursor.rowcount)


class SQLiteDatabase:
    """One SQLite file, one connection shared by the threads of this process behind a lock."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, *, timeout_s: float = 10.0, wal: bool = True) -> None:
        self.path = path
        # isolation_level=None: transactions are begun and committed here, explicitly.
        self._conn = sqlite3.connect(
            path, timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        if wal:
            self.enable_wal()

    def enable_wal(self) -> None:
        """Readers beside a writer, and other processes sharing the file."""
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")

    def read(self, work: Callable[[Tx], T]) -> T:
        with self._lock:
            return work(_SQLiteTx(self._conn))

    def write(self, work: Callable[[Tx], T]) -> T:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                done = work(_SQLiteTx(self._conn))
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return done

    def migrate(self, statements: Sequence[str]) -> None:
        def create(tx: Tx) -> None:
            for statement in statements:
                tx.execute(statement)

        self.write(create)

    @contextmanager
    def locked(self, key: str, *, wait: bool = True) -> Iterator[bool]:
        # One process serves a SQLite file's API: a lock of this process is enough.
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        if not lock.acquire(blocking=wait):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def ping(self) -> None:
        self.read(lambda tx: tx.execute("SELECT 1"))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
