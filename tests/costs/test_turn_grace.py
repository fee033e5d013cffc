"""The turn budget: a run still changing files goes past it once, by its grace; others stop."""

from __future__ import annotations

from pathlib import Path

import pytest
from cost_kit import Clock, make_loop

from kestrel.agent.loop import LoopConfig
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import BudgetNotice, Limits
from kestrel.store import MemoryStore


def writes(count: int) -> list[ScriptedTurn]:
    turns = [call("write_file", path="f.txt", content=f"{n}\n") for n in range(count)]
    return [*turns, say("Done.")]


def reads(count: int) -> list[ScriptedTurn]:
    return [*[call("read_file", path="f.txt") for _ in range(count)], say("Done.")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    (work / "f.txt").write_text("start\n")
    return work


async def run(root: Path, turns: list[ScriptedTurn], grace: float) -> tuple[str, int, list[str]]:
    clock = Clock()
    store = MemoryStore(clock=clock)
    config = LoopConfig(system_prompt="You are being tested.", turn_grace=grace)
    loop = make_loop(
        root, turns, store=store, clock=clock, limits=Limits(max_turns=4), config=config
    )
    finished = await loop.run()
    notices = [
        r.event.detail
        for r in store.read(loop.session_id)
        if isinstance(r.event, BudgetNotice) and r.event.budget == "turns"
    ]
    return finished.reason, finished.totals.turns, notices


async def test_a_run_changing_files_goes_on_by_its_grace_once(root: Path) -> None:
    reason, turns, notices = await run(root, writes(10), grace=0.5)
    assert (reason, turns) == ("budget", 6)
    assert len(notices) == 1
    assert "turn budget of 4 is spent" in notices[0] and "up to 2 more turns" in notices[0]


async def test_a_run_that_only_reads_stops_at_the_budget(root: Path) -> None:
    reason, turns, notices = await run(root, reads(10), grace=0.5)
    assert (reason, turns, notices) == ("budget", 4, [])


async def test_no_grace_makes_the_budget_a_hard_stop(root: Path) -> None:
    reason, turns, notices = await run(root, writes(10), grace=0.0)
    assert (reason, turns, notices) == ("budget", 4, [])


async def test_a_run_that_finishes_within_its_grace_is_done(root: Path) -> None:
    reason, turns, notices = await run(root, writes(4), grace=0.5)
    assert (reason, turns, len(notices)) == ("done", 5, 1)
