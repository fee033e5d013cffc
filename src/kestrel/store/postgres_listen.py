"""Waking the subscribers of a PostgreSQL store when any process, on any machine, appends.

One connection per store LISTENs on `CHANNEL`, on a daemon thread started by the first
subscription. A notification carries only `<seq> <session id>`; the subscriber reads the rows
itself, so a notification lost or coalesced costs nothing but latency. The thread connects again
after the connection breaks and then wakes every subscriber, since appends may have come and gone
while nobody listened; subscribers also poll, in case a wake-up is missed anyway.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from kestrel.protocol.errors import StoreError
from kestrel.store.postgres_schema import CHANNEL

if TYPE_CHECKING:
    from kestrel.store._common import Notifier
    from kestrel.store.postgres_link import Link

_TICK_S = 0.25
"""How often the thread looks up from waiting to see whether it should stop."""
_RETRY_S = (0.1, 0.25, 0.5, 1.0, 2.0)
"""Pauses between attempts to connect again, the last one repeated."""


class Listener:
    """A thread that turns the store's notifications into wake-ups of `notifier`."""

    def __init__(self, link: Link, notifier: Notifier) -> None:
        self._link = link
        self._notifier = notifier
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start listening, once; later calls do nothing."""
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="kestrel-store-listen", daemon=True
                )
                self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Whether the thread is listening, waiting up to `timeout` seconds for it."""
        return self._ready.wait(timeout)

    def _run(self) -> None:
        import psycopg

        failures = 0
        while not self._stop.is_set():
            try:
                self._listen()
                failures = 0
            except (psycopg.Error, StoreError, OSError):  # The server is away: try again.
                self._ready.clear()
                pause = _RETRY_S[min(failures, len(_RETRY_S) - 1)]
                failures += 1
                self._stop.wait(pause)

    def _listen(self) -> None:
        """Listen on one connection until it breaks (raises) or the listener is stopped."""
        conn = self._link.connect()
        try:
            conn.execute(f"LISTEN {CHANNEL}")
            self._ready.set()
            # Whatever was appended while this thread was not listening wakes nobody else.
            self._notifier.notify_all()
            while not self._stop.is_set():
                for note in conn.notifies(timeout=_TICK_S):
                    session_id = note.payload.partition(" ")[2]
                    self._notifier.notify(session_id)
                    if self._stop.is_set():
                        break
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        """Stop the thread and close its connection; it cannot be started again."""
        self._stop.set()
        with self._start_lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=_TICK_S * 8)
