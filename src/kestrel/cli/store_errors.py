"""What a person reads when the event store fails: one line, and an exit code that says whether
the store could not be opened (2) or a session was stopped by it (1)."""

from __future__ import annotations

from kestrel.cli.exit_codes import EXIT_ERROR, EXIT_USAGE
from kestrel.protocol.errors import SessionLogLost, StoreDamaged, StoreError, StoreFull


def store_error_line(exc: StoreError) -> str:
    """The one line for `exc`, with what to do next."""
    session_id = exc.session_id
    if isinstance(exc, StoreFull) and session_id:
        return (
            f"kestrel: {exc}; session {session_id} stopped with its log intact: free some space, "
            f"then continue it with: kestrel resume {session_id}"
        )
    if isinstance(exc, SessionLogLost):
        return f"kestrel: {exc}; the session stopped, and what it did since is not recorded"
    return f"kestrel: {exc}"


def store_error_code(exc: StoreError) -> int:
    """2 for a store that cannot be opened or read; 1 for a session it stopped, or no room."""
    if isinstance(exc, StoreDamaged):
        return EXIT_USAGE
    if isinstance(exc, (StoreFull, SessionLogLost)) or exc.session_id is not None:
        return EXIT_ERROR
    return EXIT_USAGE
