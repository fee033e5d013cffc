"""How queries and background reads share the process.

Queries first: a background read gives way to the queries that run meanwhile.

Python runs one thread at a time. A background read (a checkout's thousand files) that turns
files into records, applies them and saves them shares the interpreter with the queries the
session asks meanwhile: at 250,000 files a 25 ms keyword query took 110-140 ms during such a
read, half of it waiting for its turn. The read now checks, between small steps (a batch of
files received, a few files turned into records, a few applied), whether a query is running,
and if so waits, without holding the interpreter or the engine's lock, until none is, or
`GIVE_WAY_S` has passed, so that a session that never stops asking still gets its read done.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GIVE_WAY_S = 0.2
"""The longest one step of a background read waits for queries to end."""


class Turns:
    """Counts the queries under way; a background step waits while there are any."""

    def __init__(self) -> None:
        self._running = 0
        self._quiet = threading.Condition(threading.Lock())
        self.waited_s = 0.0
        """How long background steps have waited for queries, in all (for benchmarks)."""

    @contextmanager
    def query(self) -> Iterator[None]:
        """Held while a query runs (and while it waits for the engine's lock)."""
        with self._quiet:
            self._running += 1
        try:
            yield
        finally:
            with self._quiet:
                self._running -= 1
                if not self._running:
                    self._quiet.notify_all()

    def give_way(self) -> None:
        """Wait while a query runs, at most `GIVE_WAY_S`. Never call it holding a lock a
        query takes: the query could not run, and the wait would only end by its limit."""
        if not self._running:  # read without the lock: a query just starting waits one step
            return
        with self._quiet:
            if not self._running:
                return
            started = time.perf_counter()
            self._quiet.wait_for(lambda: not self._running, timeout=GIVE_WAY_S)
            self.waited_s += time.perf_counter() - started


Progress = Callable[[int, int], None]
"""Called as (files done, files to do) while indexing."""


class Job:
    """A refresh reading files on a background thread."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def join(self, progress: Progress | None) -> None:
        thread = self.thread
        while thread is not None and thread.is_alive():
            if progress is not None:
                progress(self.done, self.total)
            thread.join(0.2)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection passes meanwhile: a query makes tens of thousands of short-lived
    objects (80 young-generation passes per query at 250,000 files, and now and then a full
    one), and reference counting frees them all; cycles wait for the next pass after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def settle() -> None:
    """Leave what exists now out of the garbage collector's full passes.

    A big index is hundreds of thousands of long-lived objects (definitions, records); a full
    pass over them took 200-250 ms on a 31,566-file tree and fell on whichever query was running,
    most often while a background read was creating objects. They live as long as the engine,
    so the collector need not walk them again (`gc.freeze`). Objects that are dropped are still
    freed by reference counting; only reference cycles among them would wait.
    """
    gc.freeze()


def release_freed() -> None:
    """Hand memory freed in bulk back to the system. The C allocator keeps freed blocks for
    reuse: after a 47,000-file index let go of its decoded records, the process still held
    390 MB it no longer used. Only where the C library has `malloc_trim` (glibc)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
