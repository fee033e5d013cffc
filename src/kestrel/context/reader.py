"""Reading files for the index: pure work, run in low-priority worker processes for big batches.

Reading a file (classifying it, parsing it with tree-sitter, counting its terms) is most of the
cost of indexing and needs nothing from the engine, so many files are read by a pool of worker
processes, one per core, each at a lower scheduling priority than the session that asked. A
few files are read in the calling thread: starting the pool costs more than it saves.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from kestrel.context.analysis import Analysis, analyze
from kestrel.context.inventory import MAX_RANKED_BYTES, Entry, classify, hash_file
from kestrel.context.model import FileKind

RANKED_KINDS = frozenset({"code", "text"})
WORKERS_ENV = "KESTREL_INDEX_WORKERS"
MAX_WORKERS = 8
WORKER_NICENESS = 10
"""How much lower than the session the worker processes run (see `nice(1)`)."""
BATCH_FILES = 32
"""Files sent to a worker at once: enough to amortise the round trip, few enough to balance."""
IN_FLIGHT_PER_WORKER = 2
"""Batches queued per worker: keeps every worker busy while bounding what waits in memory."""


@dataclass(frozen=True, slots=True)
class ReadFile:
    """One file as read from disk: its stat, hash and kind, and the analysis of ranked files."""

    entry: Entry
    content_hash: str
    kind: FileKind
    analysis: Analysis | None


def read_entry(root: Path, entry: Entry) -> ReadFile | None:
    """Read and analyse one listed file; None when it vanished or cannot be read."""
    try:
        if entry.size > MAX_RANKED_BYTES:
            # Never hold a huge file in memory: hash it in pieces and list it unranked.
            return ReadFile(entry, hash_file(root / entry.path), "huge", None)
        data = (root / entry.path).read_bytes()
    except OSError:
        return None
    judged = classify(entry.path, data)
    if judged.kind not in RANKED_KINDS:
        return ReadFile(entry, judged.content_hash, judged.kind, None)
    text = data.decode("utf-8", errors="replace")
    analysis = analyze(entry.path, text, parse=judged.kind == "code")
    return ReadFile(entry, judged.content_hash, judged.kind, analysis)


def read_batch(root: str, entries: Sequence[Entry]) -> list[tuple[Entry, ReadFile | None]]:
    """Read several files; what a worker process runs."""
    base = Path(root)
    return [(entry, read_entry(base, entry)) for entry in entries]


def index_workers(env: Mapping[str, str] | None = None) -> int:
    """Worker processes for big reads: `$KESTREL_INDEX_WORKERS`, else one per usable core.

    0 reads in the calling thread. A value that is not a whole number is reported and ignored.
    """
    env = os.environ if env is None else env
    raw = env.get(WORKERS_ENV, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value >= 0:
            return min(value, MAX_WORKERS)
        print(
            f"kestrel: ignoring {WORKERS_ENV}={raw!r}: expected a whole number of processes "
            "(0 reads files in the session's own process)",
            file=sys.stderr,
        )
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def read_files(
    root: Path,
    entries: Sequence[Entry],
    workers: int,
    stop: threading.Event | None = None,
) -> Iterator[list[tuple[Entry, ReadFile | None]]]:
    """Batches of read files, in the order they finish; in this thread when `workers` is 0.

    Setting `stop` ends the iteration after the batch in hand; batches not yet started are
    dropped.
    """
    batches = [entries[i : i + BATCH_FILES] for i in range(0, len(entries), BATCH_FILES)]
    if workers <= 0:
        for batch in batches:
            if stop is not None and stop.is_set():
                return
            yield read_batch(str(root), batch)
        return
    with worker_pool(min(workers, len(batches))) as pool:
        waiting = deque(batches)
        running: set[Future[list[tuple[Entry, ReadFile | None]]]] = set()
        limit = workers * IN_FLIGHT_PER_WORKER
        while waiting or running:
            while waiting and len(running) < limit:
                running.add(pool.submit(read_batch, str(root), waiting.popleft()))
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                running.discard(future)
                yield future.result()
            if stop is not None and stop.is_set():
                return


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes at a lower priority; on leaving, work not started is dropped."""
    # Spawned, not forked: the session's process has threads (the event loop, the watcher),
    # and a fork copies whatever locks they hold.
    pool = ProcessPoolExecutor(
        max_workers=max(workers, 1),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_lower_priority,
    )
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
