"""Big refreshes: worker processes at low priority, reads in the background, queries meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

import kestrel.context.engine as engine_module
import kestrel.context.indexing as indexing_module
import kestrel.context.reader as reader_module
from kestrel.context.budget import estimate_tokens
from kestrel.context.builder import build_context_pack
from kestrel.context.engine import ContextEngine
from kestrel.context.inventory import Entry, content_hash
from kestrel.context.reader import (
    WORKER_NICENESS,
    ReadFile,
    ReadWorker,
    index_workers,
    read_files,
    worker_pool,
)

MODULES = 40
"""Enough files for two batches of reads and a background refresh (the limits are lowered)."""


def module_text(i: int, word: str) -> str:
    return f"def handler_{i}(request):\n    return '{word} number {i}'\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    for i in range(MODULES):
        (root / "app" / f"mod_{i:02}.py").write_text(module_text(i, "walrus"))
    (root / "README.md").write_text("# App\nHandlers that answer about walruses.\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this small repository count as a big change, so the paths under test are taken."""
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 10)
    monkeypatch.setattr(indexing_module, "BULK_MIN_FILES", 10)
    monkeypatch.setattr(indexing_module, "REBUILD_MIN_FILES", 16)
    monkeypatch.setattr(indexing_module, "POOL_MIN_FILES", 10)


class Gate:
    """Stands in for `read_files`: reads in this thread, holding batches back until opened."""

    def __init__(self, free_batches: int = 0) -> None:
        self.free_batches = free_batches
        self.opened = threading.Event()
        self.holding = threading.Event()
        """Set once a batch is held: every batch before it has been indexed by then."""
        self.delivered = 0
        self.calls = 0

    def __call__(
        self,
        root: Path,
        todo: Sequence[Entry],
        workers: int,
        stop: threading.Event | None = None,
        give_way: Callable[[], None] | None = None,
    ) -> Iterator[list[tuple[Entry, ReadFile | None]]]:
        self.calls += 1
        for batch in read_files(root, [*todo], 0, stop, give_way):
            if self.delivered >= self.free_batches:
                self.holding.set()
                assert self.opened.wait(30), "the test never opened the gate"
            self.delivered += 1
            yield batch


@contextmanager
def mid_read(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_batches: int = 0
) -> Iterator[tuple[ContextEngine, Gate]]:
    """The repository indexed, then every module rewritten and read again in the background,
    held at the gate (after `free_batches`) until the test opens it."""
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        gate = Gate(free_batches)
        monkeypatch.setattr(indexing_module, "read_files", gate)
        rewrite_all(repo, "narwhal")
        assert engine.refresh(wait=False).pending == MODULES
        yield engine, gate
    finally:
        engine.close()


def rewrite_all(root: Path, word: str) -> None:
    for i in range(MODULES):
        target = root / "app" / f"mod_{i:02}.py"
        target.write_text(module_text(i, word))
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def paths_for(engine: ContextEngine, query: str) -> list[str]:
    return [hit.path for hit in engine.search(query, k=50).files]


def test_worker_processes_read_what_this_thread_reads(repo: Path) -> None:
    entries = [
        Entry(str(p.relative_to(repo)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    ]
    here = {e.path: r for batch in read_files(repo, entries, 0) for e, r in batch}
    there = {e.path: r for batch in read_files(repo, entries, 2) for e, r in batch}
    assert here == there
    assert len(here) == MODULES + 1
    first = here["app/mod_00.py"]
    assert first is not None and first.analysis is not None
    assert first.analysis.symbols is not None
    assert [s.name for s in first.analysis.symbols.definitions] == ["handler_0"]


def test_workers_run_at_a_lower_priority(repo: Path) -> None:
    with worker_pool(1) as pool:
        assert pool.submit(str(repo), []).result() == []  # the worker is up and has answered
        (pid,) = pool.pids
        theirs = os.getpriority(os.PRIO_PROCESS, pid)
    assert theirs == min(os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS, 19)


def test_a_ctrl_c_is_left_to_the_session(repo: Path) -> None:
    """A Ctrl-C signals the terminal's whole process group: the workers let the session
    handle it (they stay in its group, where their lower priority counts)."""
    with worker_pool(1) as pool:
        assert pool.submit(str(repo), []).result() == []  # up, past its start
        (pid,) = pool.pids
        os.kill(pid, signal.SIGINT)
        entry = Entry("README.md", 1, 1)
        ((read_entry, read),) = pool.submit(str(repo), [entry]).result()
        assert read_entry == entry and read is not None
        assert pool.pids == [pid]  # the same worker answered: it did not die of it
        assert os.getpgid(pid) == os.getpgid(0)


def test_a_lost_worker_s_batch_is_read_here(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [
        Entry(str(p.relative_to(repo)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted((repo / "app").iterdir())
    ]
    real = ReadWorker.read
    calls = []

    def dies_once(self: ReadWorker, root: str, batch: Sequence[Entry]) -> object:
        calls.append(len(batch))
        if len(calls) == 1:
            self.process.kill()  # as a crash in a parser would
        return real(self, root, batch)

    monkeypatch.setattr(ReadWorker, "read", dies_once)
    read = {e.path: r for batch in read_files(repo, entries, 2) for e, r in batch}
    assert len(read) == MODULES and all(r is not None for r in read.values())
    assert len(calls) >= 2


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(
    repo: Path, tmp_path: Path
) -> None:
    script = tmp_path / "use_engine.py"
    ran = tmp_path / "ran.txt"
    script.write_text(
        "from pathlib import Path\n"
        "import kestrel.context.indexing as indexing_module\n"
        "from kestrel.context.engine import ContextEngine\n"
        f"with open({str(ran)!r}, 'a') as f:\n"
        "    f.write('ran\\n')\n"
        "indexing_module.POOL_MIN_FILES = 1\n"
        f"engine = ContextEngine.open(Path({str(repo)!r}), Path({str(tmp_path / 'c')!r}), "
        "workers=2)\n"
        "print(engine.refresh().files_ranked)\n"
        "engine.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(engine_module.__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(MODULES + 1)
    assert ran.read_text() == "ran\n"


def test_worker_count_from_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    assert index_workers({"KESTREL_INDEX_WORKERS": "0"}) == 0
    assert index_workers({"KESTREL_INDEX_WORKERS": "3"}) == 3
    assert index_workers({"KESTREL_INDEX_WORKERS": "500"}) == 8
    assert index_workers({}) >= 1
    assert index_workers({"KESTREL_INDEX_WORKERS": "many"}) == index_workers({})
    assert "ignoring KESTREL_INDEX_WORKERS='many'" in capsys.readouterr().err


@pytest.mark.usefixtures("small_limits")
def test_an_index_read_by_worker_processes_answers_like_one_read_here(
    repo: Path, tmp_path: Path
) -> None:
    pooled = ContextEngine.open(repo, tmp_path / "a", workers=2)
    local = ContextEngine.open(repo, tmp_path / "b", workers=0)
    try:
        assert pooled.refresh().files_ranked == local.refresh().files_ranked == MODULES + 1
        for query in ("handler_7 walrus", "walruses README", "request number"):
            assert pooled.search(query, k=5).files == local.search(query, k=5).files
    finally:
        pooled.close()
        local.close()


@pytest.mark.usefixtures("small_limits")
def test_a_big_change_is_read_in_the_background_and_never_served_stale(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mid_read(repo, tmp_path, monkeypatch) as (engine, gate):
        # Meanwhile: the old text of the changed files is not served, the rest still is.
        during = engine.search("walrus", k=50)
        assert during.pending == MODULES
        assert [hit.path for hit in during.files] == ["README.md"]
        assert engine.refresh(wait=False).pending == MODULES  # no second read is started
        assert gate.calls == 1
        gate.opened.set()
        engine.refresh()  # waits for the background read
        after = engine.search("narwhal", k=50)
        assert after.pending == 0
        assert len(after.files) == MODULES
        for hit in after.files:
            assert hit.content_hash == content_hash((repo / hit.path).read_bytes())


@pytest.mark.usefixtures("small_limits")
def test_a_context_pack_built_during_a_read_says_what_was_not_searched(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mid_read(repo, tmp_path, monkeypatch) as (engine, gate):
        for budget in (30, 200, 2000):
            pack = build_context_pack(engine, "walrus handlers", budget_tokens=budget)
            assert pack.pending == MODULES
            assert estimate_tokens(pack.render()) <= budget
            if budget >= 200:
                assert f"{MODULES} files still being indexed were not searched" in pack.note
            assert {item.path for item in pack.items} <= {"README.md"}
        gate.opened.set()
        engine.refresh()
        pack = build_context_pack(engine, "narwhal handlers", budget_tokens=2000)
        assert pack.pending == 0 and "still being indexed" not in pack.note


@pytest.mark.usefixtures("small_limits")
def test_a_first_index_answers_with_what_it_has_read_so_far(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(free_batches=1)
    monkeypatch.setattr(indexing_module, "read_files", gate)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        assert engine.refresh(wait=False).pending == MODULES + 1
        assert gate.holding.wait(30)  # the first batch is read and indexed, the rest waits
        served = paths_for(engine, "walrus handler")
        assert 0 < len(served) <= 32
        assert engine.pending == MODULES + 1 - 32
        gate.opened.set()
        engine.refresh()
        assert len(paths_for(engine, "walrus handler")) == MODULES + 1
        assert engine.pending == 0
    finally:
        engine.close()


@pytest.mark.usefixtures("small_limits")
def test_a_file_rechecked_during_a_background_read_keeps_its_newer_content(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mid_read(repo, tmp_path, monkeypatch) as (engine, gate):
        monkeypatch.setattr(indexing_module, "read_files", read_files)  # for the one-file check
        target = repo / "app" / "mod_03.py"
        target.write_text("def handler_3(request):\n    return 'octopus'\n")
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 9_000_000_000))
        assert engine.refresh_paths(["app/mod_03.py"]) == 1
        assert paths_for(engine, "octopus") == ["app/mod_03.py"]
        gate.opened.set()
        engine.refresh()
        assert paths_for(engine, "octopus") == ["app/mod_03.py"]
        assert "app/mod_03.py" not in paths_for(engine, "narwhal")
        assert engine.pending == 0


@pytest.mark.usefixtures("small_limits")
def test_a_file_touched_during_a_bulk_read_waits_for_the_rebuild_with_the_rest(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mid_read(repo, tmp_path, monkeypatch, free_batches=1) as (engine, gate):
        assert gate.holding.wait(30)  # the first batch is read; its postings wait for the rebuild
        assert engine.pending == MODULES  # a bulk read: nothing is served before the rebuild
        target = repo / "app" / "mod_00.py"
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 9_000_000_000))  # same bytes
        monkeypatch.setattr(indexing_module, "read_files", read_files)
        assert engine.refresh_paths(["app/mod_00.py"]) == 0
        # Its postings still hold the old text: it must not be served from them.
        assert "app/mod_00.py" not in paths_for(engine, "walrus")
        gate.opened.set()
        engine.refresh()
        assert engine.pending == 0
        assert "app/mod_00.py" in paths_for(engine, "narwhal")


@pytest.mark.usefixtures("small_limits")
def test_a_failed_background_read_is_reported_then_redone(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> Iterator[list[tuple[Entry, ReadFile | None]]]:
        raise OSError(5, "Input/output error")
        yield []  # a generator, like the real one

    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        monkeypatch.setattr(indexing_module, "read_files", broken)
        engine.refresh(wait=False)
        with pytest.raises(OSError, match="Input/output error"):
            engine.refresh()
        monkeypatch.setattr(indexing_module, "read_files", read_files)
        assert engine.refresh().added == MODULES + 1
        assert len(paths_for(engine, "walrus handler")) == MODULES + 1
    finally:
        engine.close()


@pytest.mark.usefixtures("small_limits")
def test_closing_stops_a_background_read(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_module, "BATCH_FILES", 4)  # 11 batches
    gate = Gate(free_batches=1)
    monkeypatch.setattr(indexing_module, "read_files", gate)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    engine.refresh(wait=False)
    assert gate.holding.wait(30)
    stopper = threading.Timer(0.3, gate.opened.set)
    stopper.start()
    engine.close()  # returns once the read thread has stopped
    stopper.cancel()
    assert gate.delivered == 2  # the free batch, then the one in hand when the gate opened
    # What was read is kept; the rest is read by the next refresh.
    monkeypatch.setattr(indexing_module, "read_files", read_files)
    again = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        report = again.refresh()
        assert report.files_total == MODULES + 1
        assert report.added == MODULES + 1 - 2 * 4
        assert len(paths_for(again, "walrus handler")) == MODULES + 1
    finally:
        again.close()
