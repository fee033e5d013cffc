"""Budgets, loop detection and cancellation stop a session cleanly, with the reason logged."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from loop_kit import make_loop, transcript

from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import BudgetWarning, Limits, LoopDetected, ToolFinished


class FakeClock:
    """A clock the test moves by hand, shared by the loop and the store."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def reads(n: int) -> list[ScriptedTurn]:
    return [call("list_files", pattern=f"*{i}*") for i in range(n)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "a.txt").write_text("a\n")
    return tmp_path / "w"


async def test_turn_budget(root: Path) -> None:
    loop = make_loop(root, reads(10), limits=Limits(max_turns=5))
    finished = await loop.run()
    assert (finished.reason, finished.totals.turns) == ("budget", 5)
    assert finished.detail == "turns budget spent: 5 of 5"
    warnings = [
        r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, BudgetWarning)
    ]
    assert [(w.budget, w.used) for w in warnings] == [("turns", 4)]
    # The model reads the warning with the results of its fourth turn, before its fifth.
    noted = loop.state.messages[-3]
    assert noted.role == "tool" and noted.call_id == "call_3_0"  # type: ignore[union-attr]
    assert noted.content.endswith("[kestrel] Budget warning: turns at 4 of 5.")  # type: ignore[union-attr]


async def test_token_budget(root: Path) -> None:
    turns = [
        ScriptedTurn(
            tool_calls=(("list_files", "{}"),), usage={"input_tokens": 400, "output_tokens": 100}
        )
    ] * 10
    loop = make_loop(root, turns, limits=Limits(max_tokens=1_200))
    finished = await loop.run()
    assert finished.reason == "budget" and finished.totals.tokens == 1_500
    assert finished.detail.startswith("tokens budget spent")


async def test_cost_budget(root: Path) -> None:
    turns = [ScriptedTurn(tool_calls=(("list_files", "{}"),), usage={"cost_usd": 0.4})] * 10
    loop = make_loop(root, turns, limits=Limits(max_cost_usd=1.0))
    finished = await loop.run()
    assert finished.reason == "budget" and finished.detail.startswith("cost budget spent")
    assert finished.totals.turns == 3


async def test_wall_time_budget(root: Path) -> None:
    clock = FakeClock()

    class Ticking(FakeClock):
        def __call__(self) -> float:
            clock.now += 10
            return clock.now

    loop = make_loop(root, reads(50), limits=Limits(max_wall_s=100), clock=Ticking())
    finished = await loop.run()
    assert finished.reason == "budget" and finished.detail.startswith("wall_time budget spent")


async def test_repeated_identical_calls_warn_then_stop(root: Path) -> None:
    same = call("read_file", path="a.txt")
    loop = make_loop(root, [same] * 10)
    finished = await loop.run()
    assert finished.reason == "loop"
    loops = [r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, LoopDetected)]
    assert [(e.pattern, e.action) for e in loops] == [("repeat", "warn"), ("repeat", "stop")]
    assert finished.totals.turns == 5
    warned = [m for m in loop.state.messages if m.role == "tool" and "Loop warning" in m.content]  # type: ignore[union-attr]
    assert len(warned) == 1


async def test_alternating_calls_are_a_loop_too(root: Path) -> None:
    a = call("read_file", path="a.txt")
    b = call("list_files")
    loop = make_loop(root, [a, b] * 10)
    finished = await loop.run()
    assert finished.reason == "loop"
    assert "alternated" in finished.detail


async def test_cancel_kills_the_running_command_and_is_recorded(root: Path) -> None:
    turns = [call("bash", command="sleep 60 & echo $! > child.pid; wait"), say("never")]
    loop = make_loop(root, turns)
    task = asyncio.create_task(loop.run())
    for _ in range(200):
        await asyncio.sleep(0.05)
        if (root / "child.pid").exists() and (root / "child.pid").read_text().strip():
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finished = loop.state.finished
    assert finished is not None and finished.reason == "cancelled"
    lines = transcript(loop.store.read(loop.session_id))
    assert lines[-2:] == ["result bash error", "finished cancelled"]
    result = [
        r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, ToolFinished)
    ][-1]
    assert result.interrupted
    pid = int((root / "child.pid").read_text())
    await asyncio.sleep(0.2)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
