"""A background read gives way to the queries that run meanwhile."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from context_kit import modules_repo

import kestrel.context.engine as engine_module
import kestrel.context.indexing as indexing_module
import kestrel.context.turns as turns_module
from kestrel.context.engine import ContextEngine
from kestrel.context.turns import Turns

MODULES = 40


def test_nothing_waits_when_no_query_runs() -> None:
    turns = Turns()
    turns.give_way()
    assert turns.waited_s == 0


def test_a_step_waits_for_the_query_under_way() -> None:
    turns = Turns()
    order: list[str] = []
    started, finish = threading.Event(), threading.Event()

    def query() -> None:
        with turns.query():
            started.set()
            finish.wait(30)
            order.append("query done")

    thread = threading.Thread(target=query)
    thread.start()
    assert started.wait(30)
    stepper = threading.Thread(target=lambda: (turns.give_way(), order.append("step")))
    stepper.start()
    time.sleep(0.05)  # the step is waiting by now (if it did not wait, it has run already)
    finish.set()
    thread.join(30)
    stepper.join(30)
    assert order == ["query done", "step"]
    assert turns.waited_s > 0


def test_a_query_that_never_ends_does_not_stop_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_module, "GIVE_WAY_S", 0.01)
    turns = Turns()
    with turns.query():
        turns.give_way()  # returns after its limit
        turns.give_way()
    assert turns.waited_s > 0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return modules_repo(
        tmp_path / "repo", MODULES, lambda i: f"def handler_{i}():\n    return 'walrus'\n"
    )


def test_a_background_read_waits_while_a_query_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 10)
    monkeypatch.setattr(indexing_module, "BULK_MIN_FILES", 1000)  # file by file, as a checkout
    monkeypatch.setattr(turns_module, "GIVE_WAY_S", 60.0)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        for i in range(MODULES):
            target = repo / "app" / f"mod_{i:02}.py"
            target.write_text(f"def handler_{i}():\n    return 'narwhal'\n")
        turns = engine._turns
        with turns.query():  # as a long query would: the read must not take a step meanwhile
            assert engine.refresh(wait=False).pending == MODULES
            time.sleep(0.3)
            assert engine.pending == MODULES
            # A query asked meanwhile runs (and is served without the files being read).
            assert not engine.search("narwhal").files
        engine.refresh()  # the turn is over: the read goes on and ends
        assert engine.pending == 0
        assert len(engine.search("narwhal", k=50).files) == MODULES
        assert turns.waited_s > 0
    finally:
        engine.close()
