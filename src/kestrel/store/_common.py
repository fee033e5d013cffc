"""What every event store shares: append checks, session status, prefix lookup, waking."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from kestrel.protocol.errors import SessionNotFound, StoreError

if TYPE_CHECKING:
    from kestrel.protocol.events import Event, Record

RUNNING = "running"
WAITING = "waiting"
"""A running session that waits for a person to answer a permission question."""
"""A session's status from its start until a `session_finished`."""

__all__ = ["RUNNING", "Notifier", "StoreError", "check_append", "choose", "follow", "status_after"]


def check_append(session_id: str, event: Event, *, exists: bool) -> None:
    """Refuse an append that would break the log's shape; these are programming errors."""
    from kestrel.protocol.events import SessionStarted

    if isinstance(event, SessionStarted):
        if not session_id:
            raise ValueError("a session id must not be empty")
        if event.session_id != session_id:
            raise ValueError(
                f"session_started names session {event.session_id!r} "
                f"but was appended to {session_id!r}"
            )
        if exists:
            raise ValueError(f"session {session_id!r} has already started")
    elif not exists:
        raise SessionNotFound(
            f"session {session_id!r} has no session_started event; append that first"
        )


def status_after(current: str, event: Event) -> str:
    """The session's status once `event` is in its log."""
    from kestrel.protocol.events import (
        ApprovalRequested,
        PermissionDecided,
        SessionFinished,
        SessionResumed,
    )

    if isinstance(event, SessionFinished):
        return event.reason
    if isinstance(event, SessionResumed):
        return RUNNING
    if isinstance(event, ApprovalRequested) and current == RUNNING:
        return WAITING  # On a person: `kestrel approve` answers it.
    if isinstance(event, PermissionDecided) and current == WAITING:
        return RUNNING
    return current


def choose(prefix: str, matches: Sequence[str], *, more: bool = False) -> str:
    """The single match for `prefix`, or `SessionNotFound` saying whether there were none or many.

    `matches` are ids starting with `prefix`, sorted; `more` says the caller cut the list short.
    """
    if not prefix:
        raise SessionNotFound("no session id given")
    if not matches:
        raise SessionNotFound(f"no session id starts with {prefix!r}")
    if prefix in matches:
        # A full id always wins, even when it is also the prefix of a longer one.
        return prefix
    if len(matches) > 1 or more:
        shown = ", ".join(matches) + (", ..." if more else "")
        raise SessionNotFound(
            f"session id prefix {prefix!r} is ambiguous: it matches {shown}; give more characters"
        )
    return matches[0]


class Notifier:
    """Wakes the subscribers of a session, on whichever event loop each one waits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def register(self, session_id: str) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
        """A new wake-up flag for `session_id`, bound to the running loop."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(session_id, set()).add(waiter)
        return waiter

    def unregister(
        self, session_id: str, waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event]
    ) -> None:
        """Forget a flag from `register`."""
        with self._lock:
            waiters = self._waiters.get(session_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[session_id]

    def notify(self, session_id: str) -> None:
        """Wake every subscriber of `session_id`; callable from any thread."""
        with self._lock:
            waiters = list(self._waiters.get(session_id, ()))
        self._wake(waiters)

    def notify_all(self) -> None:
        """Wake every subscriber of every session: news may have been missed meanwhile."""
        with self._lock:
            waiters = [waiter for group in self._waiters.values() for waiter in group]
        self._wake(waiters)

    def _wake(self, waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, flag in waiters:
            if loop is current:
                flag.set()
                continue
            try:
                loop.call_soon_threadsafe(flag.set)
            except RuntimeError:
                # That loop is closed; its subscriber can never run again.
                continue


async def follow(
    read: Callable[[str, int], Sequence[Record]],
    notifier: Notifier,
    session_id: str,
    after_seq: int,
    poll_s: float | None,
) -> AsyncIterator[Record]:
    """Yield records after `after_seq`, then new ones as a wake-up or a poll finds them."""
    waiter = notifier.register(session_id)
    flag = waiter[1]
    last = after_seq
    try:
        while True:
            # Clear before reading so an append that lands after the read still wakes us.
            flag.clear()
            batch = read(session_id, last)
            for record in batch:
                yield record
                last = record.seq
            if batch:
                continue
            # Not `asyncio.wait_for`: on Python 3.11 it can swallow a cancellation that lands
            # as the flag is set, and a cancelled reader would then poll forever.
            try:
                async with asyncio.timeout(poll_s):
                    await flag.wait()
            except TimeoutError:
                continue
    finally:
        notifier.unregister(session_id, waiter)
