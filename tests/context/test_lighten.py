"""A big index built whole serves from the snapshot it wrote, letting its decoded records go."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from context_kit import (
    assert_colonies_keep_working,
    colony_answers,
    colony_module,
    modules_repo,
)

import kestrel.context.engine as engine_module
import kestrel.context.indexing as indexing_module
import kestrel.context.loading as loading_module
from kestrel.context.engine import ContextEngine

MODULES = 40


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return modules_repo(tmp_path / "repo", MODULES, lambda i: colony_module(i, "walrus"))


@pytest.fixture(autouse=True)
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexing_module, "BULK_MIN_FILES", 10)
    monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10)


def lightened(engine: ContextEngine) -> bool:
    deadline = time.monotonic() + 30
    while not engine.lightened and time.monotonic() < deadline:
        time.sleep(0.02)
    return engine.lightened


def test_it_answers_as_before_and_keeps_working(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10**9)
    held = ContextEngine.open(repo, tmp_path / "held", workers=0)
    held.refresh()
    want = colony_answers(held)
    held.close()
    assert not held.lightened
    monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        assert lightened(engine)
        assert colony_answers(engine) == want
        assert_colonies_keep_working(engine, repo)
    finally:
        engine.close()


class HeldWrite:
    """Stands in for the snapshot writer's `write_snapshot`, holding it until released."""

    def __init__(self) -> None:
        self.real = loading_module.write_snapshot
        self.started = threading.Event()
        self.go = threading.Event()

    def __call__(self, *args: Any) -> None:
        self.started.set()
        assert self.go.wait(30)
        self.real(*args)


@pytest.fixture
def held_write(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldWrite]:
    held = HeldWrite()
    monkeypatch.setattr(loading_module, "write_snapshot", held)
    yield held
    held.go.set()


def test_a_change_while_the_snapshot_is_written_keeps_the_records(
    repo: Path, tmp_path: Path, held_write: HeldWrite
) -> None:
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        assert held_write.started.wait(30)
        (repo / "app" / "mod_05.py").write_text(colony_module(5, "narwhal"))
        assert engine.refresh_paths(["app/mod_05.py"]) == 1
        held_write.go.set()
        thread = engine._snapshots._thread
        assert thread is not None
        thread.join(30)
        assert not engine.lightened
        assert [h.path for h in engine.search("narwhal colony").files][:1] == ["app/mod_05.py"]
    finally:
        engine.close()


def test_closing_while_the_snapshot_is_written_does_not_wait_on_itself(
    repo: Path, tmp_path: Path, held_write: HeldWrite
) -> None:
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    engine.refresh()
    assert held_write.started.wait(30)
    closing = threading.Thread(target=engine.close)
    closing.start()
    time.sleep(0.1)  # close() now holds the engine's lock and waits for the writer
    held_write.go.set()
    closing.join(30)
    assert not closing.is_alive()
    assert not engine.lightened


def test_a_snapshot_another_process_wrote_meanwhile_is_not_taken(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sessions on one repository share the index: the file at the snapshot's path may be
    the other's by the time this one reads it back (its term ids need not be this one's)."""
    real = loading_module.write_snapshot

    def then_another(path: Path, data: Any) -> None:
        real(path, data)
        real(path, replace(data, nonce="another process"))

    monkeypatch.setattr(loading_module, "write_snapshot", then_another)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        thread = engine._snapshots._thread
        assert thread is not None
        thread.join(30)
        assert not engine.lightened
        assert engine.search("walrus colony").files
    finally:
        engine.close()


@pytest.mark.parametrize("serving", [False, True])
def test_a_write_done_before_the_swap_still_lets_go(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serving: bool
) -> None:
    """On a small index the write can end before the reading thread swaps the postings in."""
    written = threading.Event()
    real_write, real_swap = loading_module.write_snapshot, indexing_module.Indexing._swap

    def write(path: Path, data: Any) -> None:
        real_write(path, data)
        written.set()

    def swap(self: Any, fresh: Any, changed: set[str]) -> None:
        if self._snapshots._thread is not None:
            written.wait(5)  # with the lock held: the writer finishes first
        real_swap(self, fresh, changed)

    monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10**9)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        engine._snapshots.wait()
        monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10)
        monkeypatch.setattr(loading_module, "write_snapshot", write)
        monkeypatch.setattr(indexing_module.Indexing, "_swap", swap)
        engine._rebuild(serving=serving, final=True)
        assert written.is_set()
        assert lightened(engine)
        assert engine.search("walrus colony").files
    finally:
        engine.close()
