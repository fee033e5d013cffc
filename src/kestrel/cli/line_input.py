"""Read a line from the terminal without blocking the event loop.

Standard input is read by a daemon thread, so a Ctrl-C while the person is being asked ends the
program without waiting for an Enter that never comes. A read whose asker gave up (the question
was answered from another terminal) stays outstanding, and the next question takes its line:
the person answers what the screen shows last.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future

_outstanding: Future[str | None] | None = None


async def read_line() -> str | None:
    """One line from standard input; None at end of input."""
    global _outstanding
    if _outstanding is None:
        _outstanding = _start_reader()
    reading = _outstanding
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def settle(done: Future[str | None]) -> None:
        if not answer.done():
            answer.set_result(done.result())

    def from_reader(done: Future[str | None]) -> None:
        with contextlib.suppress(RuntimeError):  # The loop may have closed meanwhile.
            loop.call_soon_threadsafe(settle, done)

    reading.add_done_callback(from_reader)
    try:
        line = await answer
    except asyncio.CancelledError:
        print(flush=True)  # Cancelled while asking: what follows starts on a fresh line.
        raise
    _outstanding = None
    return line


def _start_reader() -> Future[str | None]:
    reading: Future[str | None] = Future()

    def reader() -> None:
        try:
            reading.set_result(input())
        except EOFError:
            reading.set_result(None)
        except Exception as exc:  # A closed or broken stdin: the asker sees it.
            reading.set_exception(exc)

    threading.Thread(target=reader, name="kestrel-stdin", daemon=True).start()
    return reading
