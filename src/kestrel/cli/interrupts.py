"""Ctrl-C and SIGTERM at a terminal: one line, a known exit code, and the session settled.

Ctrl-C raises `KeyboardInterrupt` in the main thread wherever the program stands; once
`watch_terminate` has run, SIGTERM raises `Terminated`, a kind of it. While a session runs,
`on_signals` turns both into a cancel of the running task instead, so the agent loop records the
session as cancelled. Whichever way a signal arrives, it is noted here once, and the process ends
with one line (`stopped_line`) and the exit code of the first signal (`exit_code`).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from kestrel.cli.exit_codes import EXIT_CANCELLED, EXIT_TERMINATED

if TYPE_CHECKING:
    from rich.console import Console

    from kestrel.store.base import EventStore

CANCEL_DETAIL = "cancelled by the user"
TERMINATE_DETAIL = "stopped by SIGTERM"


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled like Ctrl-C wherever that is handled, but exits 143."""


@dataclass(slots=True)
class _Stop:
    signal: int | None = None
    said: bool = False


_stop = _Stop()


def note(signum: int) -> None:
    """Remember the first signal that stopped this process.

    From then on Python's complaints about what the signal cut short (an event loop it stopped
    half-built, a coroutine never awaited) are dropped: they say nothing the person can act on.
    """
    if _stop.signal is None:
        _stop.signal = signum
        sys.unraisablehook = _ignore
        warnings.simplefilter("ignore")


def _ignore(unraisable: Any) -> None:
    """An unraisable exception after a signal: nothing to report."""


def note_interrupt(exc: KeyboardInterrupt) -> None:
    """Remember the signal behind a `KeyboardInterrupt` (or `Terminated`) that was caught."""
    note(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def received() -> int | None:
    """The signal that stopped this process, if one did."""
    return _stop.signal


def exit_code() -> int:
    """The exit code for how the process was stopped: 143 for SIGTERM, else 130."""
    return EXIT_TERMINATED if _stop.signal == signal.SIGTERM else EXIT_CANCELLED


def stopped_line(session_id: str | None) -> str:
    """What the person reads once a signal stopped the command, with how to resume if it can."""
    head = "Stopped by SIGTERM." if _stop.signal == signal.SIGTERM else "Cancelled."
    return head if session_id is None else f"{head} Resume with: kestrel resume {session_id}"


def said() -> bool:
    """Whether the stopped line has been printed already."""
    return _stop.said


def mark_said() -> None:
    """Record that the stopped line has been printed, so nobody prints it twice."""
    _stop.said = True


def watch_terminate() -> None:
    """From now on SIGTERM raises `Terminated` in the main thread, as Ctrl-C raises
    `KeyboardInterrupt`, so every `finally` and `except KeyboardInterrupt` runs for it too."""
    with contextlib.suppress(ValueError):  # Only the main thread may set handlers.
        signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    note(signum)
    raise Terminated


@contextlib.contextmanager
def on_signals(cancel: Callable[[str], object]) -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM call `cancel(why)` in the running event loop (once; a second
    signal raises as before); the handlers in place before come back afterwards.

    The event loop's own signal handling wakes it even while it waits in `select`, whichever
    thread the signal reached (a thread blocked reading the terminal, say).
    """
    import asyncio  # Here: the console script imports this module before anything else.

    running = asyncio.get_running_loop()
    cancelled = False

    def handle(signum: int) -> None:
        nonlocal cancelled
        note(signum)
        if cancelled:  # A second signal: stop waiting for the cancel to finish.
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        cancelled = True
        cancel(TERMINATE_DETAIL if signum == signal.SIGTERM else CANCEL_DETAIL)

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.getsignal(signum)
            running.add_signal_handler(signum, handle, signum)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # Not the main thread, or no signals here: they stay as they were.
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                running.remove_signal_handler(signum)
            with contextlib.suppress(ValueError):
                signal.signal(signum, handler)


def settle(store: EventStore, session_id: str) -> None:
    """Record a session that a signal stopped outside the agent loop as cancelled, unless its
    log says it finished; `kestrel resume` then continues it."""
    from kestrel.agent.state import replay
    from kestrel.protocol.events import SessionFinished

    state = replay(store.read(session_id))
    if state.finished is not None:
        return
    detail = TERMINATE_DETAIL if _stop.signal == signal.SIGTERM else CANCEL_DETAIL
    store.append(
        session_id, SessionFinished(reason="cancelled", detail=detail, totals=state.totals)
    )


def announce(console: Console, session_id: str | None) -> int:
    """Print the stopped line (once, whoever prints it first) and return the exit code."""
    from rich.text import Text

    if not said():
        console.print(Text(stopped_line(session_id), style="bold yellow"), soft_wrap=True)
        mark_said()
    return exit_code()
