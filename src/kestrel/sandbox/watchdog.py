"""A thread that stops a command at its deadline or when a limit trips, whatever the event loop
is doing.

The event loop that reads a command's output can be held up: a consumer of the output that
blocks (a terminal nobody reads), a flood of output to decode, a busy machine. A deadline kept by
that loop is then kept late. The watchdog keeps it on its own thread and kills the whole tree
itself; the loop only collects the result afterwards.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

TERM_GRACE_S = 0.3
"""How long, after the deadline, a process of the command's group may take to exit on SIGTERM
before it gets SIGKILL. A sandboxed command's processes do not wait for it: they go at once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guards:
    """What stops a command early besides its deadline, and how to kill all of it at once."""

    kill_tree: Callable[[int], None] | None = None
    """Kills every process of the command started as that PID at once (a sandbox's PID
    namespace, its cgroups)."""
    check: Callable[[], str | None] | None = None
    """Called every `check_every_s` while the command runs; a returned reason stops it."""
    check_every_s: float = 0.2


class Watchdog:
    """Kills the process group `pgid` (and `guards.kill_tree`) at `deadline` or when a check trips.

    `reason` says why it fired: "timeout", the reason a check returned, or None.
    """

    def __init__(self, pgid: int, deadline: float, guards: Guards) -> None:
        self._pgid = pgid
        self._deadline = deadline
        self._guards = guards
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="kestrel-watchdog")
        self.reason: str | None = None

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the command ended); waits for a kill in progress to finish."""
        self._stop.set()
        self._thread.join()

    def fire(self, reason: str) -> None:
        """Kill the command now, recording `reason` unless one was recorded already."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
        self._kill()

    def _watch(self) -> None:
        guards = self._guards
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= self._deadline:
                self.fire("timeout")
                return
            wait = self._deadline - now
            if guards.check is not None:
                wait = min(wait, guards.check_every_s)
            if self._stop.wait(wait):
                return
            if guards.check is not None and time.monotonic() < self._deadline:
                reason = guards.check()
                if reason is not None and not self._stop.is_set():
                    self.fire(reason)
                    return

    def _kill(self) -> None:
        if self._guards.kill_tree is not None:
            self._guards.kill_tree(self._pgid)
        if not signal_group(self._pgid, signal.SIGTERM):
            return
        # A process that ignores SIGTERM gets SIGKILL after a short grace, not a long one.
        end = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < end:
            if not _group_exists(self._pgid):
                return
            time.sleep(0.02)
        signal_group(self._pgid, signal.SIGKILL)
        if self._guards.kill_tree is not None:
            self._guards.kill_tree(self._pgid)


def signal_group(pgid: int, signum: signal.Signals) -> bool:
    """Send `signum` to the group; False when nothing in it is left to receive it."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only a group member that changed its user could refuse; the rest got the signal.
        return True
    return True
    return True


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
