"""What can go wrong under the PostgreSQL store, named: a server that cannot be reached, a
connection that broke, a full disk on the server, a database written by a newer Kestrel.

Every `psycopg.Error` the store meets leaves it as one `StoreError` subclass whose message is a
sentence for a person and never holds the URL's password; callers branch on the type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.protocol.errors import SessionLogLost, StoreError, StoreFull

if TYPE_CHECKING:
    import psycopg

MISSING_DRIVER = (
    "the PostgreSQL event store needs the psycopg package: "
    "install Kestrel with its cluster extra (pip install 'kestrel[cluster]')"
)
"""What a person reads when a PostgreSQL URL is configured but psycopg is not installed."""


class StoreUnavailable(StoreError):
    """The database server could not be reached, or the connection to it broke.

    Nothing was kept of the call that failed, unless the message says an append may have been;
    the store connects again on its next call, so the same object works once the server is back.
    """


class CommitUnknown(StoreUnavailable):
    """The connection broke while an append was being committed: the event may or may not be in
    the log."""


class SessionBusy(StoreError):
    """Another process held the session's row for longer than the store waits for it (its
    `busy_timeout_s`); nothing of the append was kept."""


def where(url: str) -> str:
    """The server and database a URL names, for messages: never its password."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:  # A URL psycopg cannot parse is reported by connect itself.
        return "the PostgreSQL event store"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    place = host if host.startswith("/") else f"{host}:{port}"
    database = str(parts.get("dbname") or parts.get("user") or "")
    named = f" {database}" if database else ""
    return f"the PostgreSQL event store{named} at {place}"


def first_line(exc: BaseException) -> str:
    """psycopg's message without its hints and details, on one line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.removeprefix("connection failed: ").strip()


def unreachable(place: str, exc: BaseException, session_id: str | None = None) -> StoreUnavailable:
    """The error for a server that refused or never answered a new connection."""
    return StoreUnavailable(
        f"cannot reach {place}: {first_line(exc)}", path=place, session_id=session_id
    )


def translate(
    exc: psycopg.Error, place: str, session_id: str | None = None, *, lost: bool = False
) -> StoreError:
    """The `StoreError` that `exc`, raised while using the store at `place`, stands for.

    `lost` says the connection broke under the call, whatever the server said about it.
    """
    import psycopg.errors

    if lost or isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CannotConnectNow):
        return StoreUnavailable(
            f"lost the connection to {place}: {first_line(exc)}; the next call connects again",
            path=place,
            session_id=session_id,
        )
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        held = f"session {session_id}" if session_id else "the session"
        return SessionBusy(
            f"{held} is held by another writer of {place} for longer than this store waits; "
            "nothing was appended",
            path=place,
            session_id=session_id,
        )
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreFull(
            f"no space left to write {place}: the database server's disk is full",
            path=place,
            session_id=session_id,
        )
    return StoreError(f"{place} failed: {first_line(exc)}", path=place, session_id=session_id)


def commit_unknown(place: str, session_id: str | None, exc: BaseException) -> CommitUnknown:
    """The error for a connection that broke while an append was being committed."""
    event = f"an event of session {session_id}" if session_id else "a session's first event"
    return CommitUnknown(
        f"lost the connection to {place} while committing {event} ({first_line(exc)}): "
        "it may or may not be in the log; read the log before going on",
        path=place,
        session_id=session_id,
    )


def log_lost(place: str, session_id: str) -> SessionLogLost:
    """The error for a running session whose rows were deleted from the store."""
    return SessionLogLost(
        f"session {session_id}'s log was deleted from {place} while it was running",
        path=place,
        session_id=session_id,
    )


def too_new(place: str, version: int, supported: int) -> StoreError:
    """The error for a database whose layout a newer Kestrel wrote."""
    return StoreError(
        f"{place} has schema version {version}, but this Kestrel reads up to version "
        f"{supported}; upgrade Kestrel",
        path=place,
    )
