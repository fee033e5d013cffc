"""The index's snapshot kept fresh: changed files are written into a new one, and served."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from context_kit import colony_answers, colony_module, decoded_rows, modules_repo, write

import kestrel.context.compaction as compaction
import kestrel.context.engine as engine_module
from kestrel.context.engine import ContextEngine

MODULES = 40


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return modules_repo(tmp_path / "repo", MODULES, lambda i: colony_module(i, "walrus"))


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "COMPACT_MIN_FILES", 5)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return decoded_rows(monkeypatch)


def reopened(repo: Path, cache: Path) -> ContextEngine:
    """An engine over an index built and closed before: served from its snapshot."""
    engine = ContextEngine.open(repo, cache, workers=0)
    engine.refresh()
    engine.close()
    ContextEngine.open(repo, cache, workers=0).close()  # decodes the rows, writes the snapshot
    engine = ContextEngine.open(repo, cache, workers=0)
    assert engine.opened_from_snapshot
    return engine


def rewrite(repo: Path, modules: Iterable[int], word: str) -> None:
    write(repo, {f"app/mod_{i:02}.py": colony_module(i, word) for i in modules}, bumped=True)


def answers(engine: ContextEngine) -> list[Any]:
    return [*colony_answers(engine), [h.path for h in engine.search("narwhal orca").files]]


def from_scratch(repo: Path, cache: Path) -> list[Any]:
    engine = ContextEngine.open(repo, cache, workers=0)
    try:
        engine.refresh()
        return answers(engine)
    finally:
        engine.close()


def reopen_decoding(repo: Path, cache: Path, decoded: list[str]) -> tuple[list[str], list[Any]]:
    """A fresh open of the index: the rows it decoded (sorted) and its answers, once up to
    date (its snapshot served it, and nothing on disk had changed since it was closed)."""
    decoded.clear()
    again = ContextEngine.open(repo, cache, workers=0)
    try:
        assert again.opened_from_snapshot
        rows = sorted(decoded)
        assert again.refresh().changed == 0
        return rows, answers(again)
    finally:
        again.close()


def stored(engine: ContextEngine, modules: Iterable[int]) -> list[bool]:
    """Whether each module's record is read from a snapshot (not decoded and held)."""
    out = []
    for i in modules:
        record = engine.record(f"app/mod_{i:02}.py")
        assert record is not None
        out.append(record.snapshot_slot is not None)
    return out


@pytest.mark.parametrize("background", [False, True])
def test_enough_changed_files_are_served_from_a_new_snapshot(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    decoded: list[str],
    background: bool,
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    rewrite(repo, range(6), "narwhal")
    if background:
        monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 1)
        assert engine.refresh(wait=False).pending == 6
    assert engine.refresh().changed == (0 if background else 6)
    engine.wait_for_snapshot()
    try:
        assert stored(engine, range(6)) == [True] * 6
        served = answers(engine)
    finally:
        engine.close()
    assert served == from_scratch(repo, tmp_path / "scratch")
    rows, again = reopen_decoding(repo, tmp_path / "cache", decoded)
    assert rows == [] and again == served  # nothing left to decode


def test_a_few_changed_files_are_kept_in_memory(
    repo: Path, tmp_path: Path, decoded: list[str]
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    rewrite(repo, range(4), "narwhal")
    assert engine.refresh().changed == 4
    engine.wait_for_snapshot()
    assert stored(engine, range(4)) == [False] * 4
    engine.close()
    rows, _ = reopen_decoding(repo, tmp_path / "cache", decoded)
    assert rows == [f"app/mod_{i:02}.py" for i in range(4)]


def test_a_change_made_while_it_is_written_is_kept(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[str]
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    real = compaction.written_whole

    def and_an_edit(*args: Any) -> Any:
        loaded = real(*args)
        rewrite(repo, [7], "orca")  # saved after the snapshot's point: the log has it
        assert engine.refresh_paths(["app/mod_07.py"]) == 1
        return loaded

    monkeypatch.setattr(compaction, "written_whole", and_an_edit)
    rewrite(repo, range(6), "narwhal")
    assert engine.refresh().changed == 6
    engine.wait_for_snapshot()
    try:
        assert stored(engine, [0, 7]) == [False, False]  # not swapped: the edit came after
        served = answers(engine)
        assert served[-1][:1] == ["app/mod_07.py"]
    finally:
        engine.close()
    assert served == from_scratch(repo, tmp_path / "scratch")
    rows, again = reopen_decoding(repo, tmp_path / "cache", decoded)
    assert rows == ["app/mod_07.py"] and again == served


def test_a_failed_write_leaves_the_index_serving(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    real = compaction.written_whole
    raised: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)

    def broken(*args: Any) -> Any:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(compaction, "written_whole", broken)
    rewrite(repo, range(6), "narwhal")
    assert engine.refresh().changed == 6
    engine.wait_for_snapshot()
    try:
        assert raised == [] and stored(engine, range(6)) == [False] * 6
        assert engine.search("narwhal colony").files[0].path.startswith("app/mod_0")
        monkeypatch.setattr(compaction, "written_whole", real)
        rewrite(repo, [20], "orca")
        assert engine.refresh().changed == 1
        assert not engine.writing_snapshot  # not tried again after every read...
        engine.wait_for_snapshot()
        assert stored(engine, [0, 20]) == [False, False]
        rewrite(repo, range(30, 35), "orca")
        assert engine.refresh().changed == 5
        engine.wait_for_snapshot()  # ...but once as many more files changed
        assert stored(engine, [0, 20, 30]) == [True] * 3
    finally:
        engine.close()


def test_enough_changed_while_it_is_written_make_another_due(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[str]
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    real = compaction.written_whole
    calls: list[int] = []

    def and_a_checkout(*args: Any) -> Any:
        loaded = real(*args)
        calls.append(1)
        if len(calls) == 1:
            rewrite(repo, range(10, 16), "orca")
            assert engine.refresh().changed == 6
        return loaded

    monkeypatch.setattr(compaction, "written_whole", and_a_checkout)
    rewrite(repo, range(6), "narwhal")
    assert engine.refresh().changed == 6
    deadline = time.monotonic() + 30
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    engine.wait_for_snapshot()
    try:
        assert len(calls) == 2
        assert stored(engine, [0, 5, 10, 15]) == [True] * 4  # the second one was served
        served = answers(engine)
    finally:
        engine.close()
    rows, again = reopen_decoding(repo, tmp_path / "cache", decoded)
    assert rows == [] and again == served == from_scratch(repo, tmp_path / "scratch")


def test_closing_stops_a_snapshot_being_written(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoded: list[str]
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    real = compaction.written_whole
    started = threading.Event()

    def until_closed(*args: Any) -> Any:
        started.set()
        stop = args[-1]
        deadline = time.monotonic() + 30
        while not stop() and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(*args)  # asked to stop: gives up before its first column

    monkeypatch.setattr(compaction, "written_whole", until_closed)
    rewrite(repo, range(6), "narwhal")
    assert engine.refresh().changed == 6
    assert started.wait(30)
    engine.close()
    assert not engine._snapshots.busy
    cache_files = [p.name for p in (tmp_path / "cache").rglob("*")]
    assert not [name for name in cache_files if name.endswith(".tmp")]
    # The snapshot before, and the six rows written since.
    rows, again = reopen_decoding(repo, tmp_path / "cache", decoded)
    assert rows == [f"app/mod_{i:02}.py" for i in range(6)]
    assert again == from_scratch(repo, tmp_path / "scratch")


def test_a_write_waits_while_a_refresh_holds_the_engine(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = reopened(repo, tmp_path / "cache")
    real = compaction.written_whole
    written = threading.Event()

    def noted(*args: Any) -> Any:
        loaded = real(*args)
        written.set()
        return loaded

    monkeypatch.setattr(compaction, "written_whole", noted)
    rewrite(repo, range(6), "narwhal")
    try:
        with engine._lock:  # as a refresh reading a checkout holds it
            assert engine.refresh().changed == 6  # begins the write, which waits for the lock
            assert not written.wait(0.5)  # time enough to write 40 files, were it not waiting
        assert written.wait(30)
        engine.wait_for_snapshot()
        assert stored(engine, range(6)) == [True] * 6
    finally:
        engine.close()
