"""Reading files for the index: pure work, run in low-priority worker processes for big batches.

Reading a file (classifying it, parsing it with tree-sitter, counting its terms) is most of the
cost of indexing and needs nothing from the engine, so many files are read by worker processes,
one per core, each at a lower scheduling priority than the session that asked. A few files are
read in the calling thread: starting the workers costs more than it saves.

The workers are `python -m kestrel.context.read_worker` processes fed batches over a pipe, not
a `multiprocessing` pool: a spawned pool runs the parent's main script again in every worker
(a script without an `if __name__ == "__main__":` guard would run twice over), and a forked
one copies whatever locks the session's threads hold.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kestrel.context.analysis import Analysis, analyze
from kestrel.context.inventory import MAX_RANKED_BYTES, Entry, classify, hash_file
from kestrel.context.model import FileKind
from kestrel.protocol.oserrors import error_text

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


Batch = list[tuple[Entry, "ReadFile | None"]]


class WorkerLost(Exception):
    """A worker process died or answered nonsense; its batch is read here instead."""


class ReadWorker:
    """One worker process: a batch goes in on its stdin, the read files come back on stdout."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kestrel.context.read_worker", str(WORKER_NICENESS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a session's terminal is not the place for it
            env=env,
        )

    def read(self, root: str, entries: Sequence[Entry]) -> Batch:
        """Have the worker read `entries`; raises WorkerLost if it cannot answer."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            send_message(stdin, (root, list(entries)))
            answer = receive_message(stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError) as exc:
            raise WorkerLost(f"index worker {self.process.pid}: {error_text(exc)}") from exc
        if not isinstance(answer, list) or len(answer) != len(entries):
            raise WorkerLost(f"index worker {self.process.pid} answered out of turn")
        return answer

    def close(self) -> None:
        """End the worker: closing its stdin ends its loop; a stuck one is killed."""
        if self.process.stdin is not None:
            with suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def send_message(stream: IO[bytes], value: object) -> None:
    """One pickled value, after its length in 8 little-endian bytes."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def receive_message(stream: IO[bytes]) -> object:
    """The next value `send_message` wrote; EOFError when the stream ends first."""
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("the stream ended")
    size = int.from_bytes(header, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream ended inside a message")
    # Only ever between this process and the workers it started, over their private pipes.
    return pickle.loads(data)  # noqa: S301


class WorkerPool:
    """Worker processes, each driven by a thread of its own (waiting on a pipe frees the GIL)."""

    def __init__(self, workers: int, give_way: Callable[[], None] | None = None) -> None:
        self._give_way = give_way
        self._idle: queue.SimpleQueue[ReadWorker] = queue.SimpleQueue()
        self._all = [ReadWorker() for _ in range(max(workers, 1))]
        for worker in self._all:
            self._idle.put(worker)
        self._threads = ThreadPoolExecutor(len(self._all), thread_name_prefix="kestrel-read")
        self._lock = threading.Lock()

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids."""
        with self._lock:
            return [w.process.pid for w in self._all]

    def submit(self, root: str, entries: Sequence[Entry]) -> Future[Batch]:
        """Read `entries` in the next idle worker."""
        return self._threads.submit(self._run, root, entries)

    def _run(self, root: str, entries: Sequence[Entry]) -> Batch:
        worker = self._idle.get()
        try:
            if self._give_way is not None:
                self._give_way()  # taking a batch in holds the interpreter: not during a query
            answer = worker.read(root, entries)
        except WorkerLost:
            # This one is gone: a fresh worker takes its place for the next batch.
            worker.close()
            fresh = ReadWorker()
            with self._lock:
                self._all[self._all.index(worker)] = fresh
            self._idle.put(fresh)
            raise
        self._idle.put(worker)
        return answer

    def close(self) -> None:
        """Wait for the batches under way, then end every worker."""
        self._threads.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for worker in self._all:
                worker.close()


@contextmanager
def worker_pool(workers: int, give_way: Callable[[], None] | None = None) -> Iterator[WorkerPool]:
    """`workers` worker processes at a lower priority; on leaving, work not started is dropped."""
    pool = WorkerPool(workers, give_way)
    try:
        yield pool
    finally:
        pool.close()


def read_files(
    root: Path,
    entries: Sequence[Entry],
    workers: int,
    stop: threading.Event | None = None,
    give_way: Callable[[], None] | None = None,
) -> Iterator[Batch]:
    """Batches of read files, in the order they finish; in this thread when `workers` is 0.

    Setting `stop` ends the iteration after the batch in hand; batches not yet started are
    dropped. A batch whose worker died is read in this thread. `give_way` is called before
    each batch is read or taken in from a worker (see `kestrel.context.turns`).
    """
    batches = [entries[i : i + BATCH_FILES] for i in range(0, len(entries), BATCH_FILES)]
    if workers <= 0:
        for batch in batches:
            if stop is not None and stop.is_set():
                return
            if give_way is not None:
                give_way()
            yield read_batch(str(root), batch)
        return
    with worker_pool(min(workers, len(batches)), give_way) as pool:
        waiting = deque(batches)
        running: dict[Future[Batch], Sequence[Entry]] = {}
        limit = workers * IN_FLIGHT_PER_WORKER
        while waiting or running:
            while waiting and len(running) < limit:
                batch = waiting.popleft()
                running[pool.submit(str(root), batch)] = batch
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                batch = running.pop(future)
                try:
                    yield future.result()
                except WorkerLost:
                    yield read_batch(str(root), batch)
            if stop is not None and stop.is_set():
                return
