"""What can go wrong under the SQLite store, named: damaged files, full disks, deleted logs.

Every `sqlite3.Error` and `OSError` the store meets leaves it as one `StoreError` subclass whose
message is a sentence for a person; callers branch on the type.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kestrel.protocol.errors import SessionLogLost, StoreDamaged, StoreError, StoreFull
from kestrel.protocol.oserrors import os_error_text

REPAIR_HINT = "run `kestrel doctor --repair` to salvage what can be read"
"""What a person can do about a damaged store, named in every message about one."""

_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_NO_ROOM_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_LOW_SPACE_BYTES = 1 << 20
_MAGIC = b"SQLite format 3\x00"


def damaged(path: Path, reason: str) -> StoreDamaged:
    """The error for a store file that is not a readable database."""
    return StoreDamaged(
        f"the event store {path} is damaged ({reason}); {REPAIR_HINT}", path=str(path)
    )


def translate(exc: BaseException, path: Path, session_id: str | None = None) -> StoreError:
    """The `StoreError` that `exc`, raised while using the store at `path`, stands for."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary in _DAMAGED:
            return damaged(path, str(exc))
        # SQLite says SQLITE_FULL for a short write, but a plain write error when not one byte
        # fits: that counts as "no room" too when there is, in fact, none.
        if primary == sqlite3.SQLITE_FULL or (
            code == sqlite3.SQLITE_IOERR_WRITE and _no_room_left(path)
        ):
            return StoreFull(_no_room(path), path=str(path), session_id=session_id)
        return StoreError(
            f"the event store {path} failed: {exc}", path=str(path), session_id=session_id
        )
    if isinstance(exc, OSError):
        if exc.errno in _NO_ROOM_ERRNOS:
            return StoreFull(_no_room(path), path=str(path), session_id=session_id)
        return StoreError(
            f"cannot open the sessions in {path.parent}: {os_error_text(exc)}",
            path=str(path),
            session_id=session_id,
        )
    return StoreError(f"the event store {path} failed: {exc}", path=str(path))


def _no_room_left(path: Path) -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        return True
    try:
        return shutil.disk_usage(path.parent).free < _LOW_SPACE_BYTES
    except OSError:
        return False


def _no_room(path: Path) -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    why = "the disk is full"
    if soft != resource.RLIM_INFINITY:
        why = f"the disk is full or the file size limit (ulimit -f, {soft} bytes) is reached"
    return f"no space left to write the event store {path}: {why}"


@contextmanager
def guarded(path: Path, session_id: str | None = None) -> Iterator[None]:
    """Run the block, turning any SQLite or operating-system error into a `StoreError`."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise translate(exc, path, session_id) from exc


def check_header(path: Path) -> None:
    """Refuse a file that cannot be a whole SQLite database: a foreign header, or one shorter
    than its header says (torn by a crash or a full disk). Cheap: reads 100 bytes."""
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            header = file.read(100)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise translate(exc, path) from exc
    if size == 0:
        return
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise damaged(path, "not an SQLite database")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or size % page_size:
        raise damaged(path, "the file ends in the middle of a page")
    pages = int.from_bytes(header[28:32], "big")
    # The page count is valid only when its change counter matches; a write-ahead log that
    # holds frames may still complete a checkpoint a crash cut short, so trust that instead.
    counted = header[24:28] == header[92:96]
    if counted and size < pages * page_size and not _wal_has_frames(path):
        raise damaged(path, f"the file holds {size // page_size} of its {pages} pages")


def _wal_has_frames(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 32
    except OSError:
        return False


def identity(path: Path) -> tuple[int, int] | None:
    """The file's device and inode, to notice it being deleted or replaced; None when absent."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def check_same_file(path: Path, opened: tuple[int, int] | None, session_id: str) -> None:
    """Refuse to write on once the file this store opened is no longer at `path`."""
    if opened is not None and identity(path) != opened:
        raise SessionLogLost(
            f"the event store {path} was deleted or replaced while session {session_id} "
            "was running",
            path=str(path),
            session_id=session_id,
        )


def session_lost(path: Path, session_id: str) -> SessionLogLost:
    """The error for a running session whose rows were deleted from the store."""
    return SessionLogLost(
        f"session {session_id}'s log was deleted from the event store {path} while it was running",
        path=str(path),
        session_id=session_id,
    )


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back what is still open; SQLite ends some failed transactions (a full disk) itself."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
