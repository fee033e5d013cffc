"""The same errors coming back while the files change are progress, not a loop.

A model that keeps changing its approach while a missing module fails every run (the usual sight
when a project's dependencies are not installed) must not be stopped or rewound; the same failing
states coming back on the same files still are (see test_oscillation_recovery.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cost_kit import Clock, make_loop

from kestrel.app import GitCheckpointer
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import CheckpointCreated, LoopDetected, LoopRecovered
from kestrel.store import MemoryStore
from kestrel.workspace import CheckpointStore

CHECK = """\
import calc
raise SystemExit("ModuleNotFoundError: No module named 'numpy'")
"""
OTHER = call("bash", command="python3 -c 'import not_installed_anywhere'")
TEST = call("bash", command="python3 check.py")


def write(value: int) -> ScriptedTurn:
    return call("write_file", path="calc.py", content=f"VALUE = {value}\n")


def shell_write(value: int) -> ScriptedTurn:
    return call("bash", command=f"echo 'VALUE = {value}' > calc.py")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    (work / "calc.py").write_text("VALUE = 0\n")
    (work / "check.py").write_text(CHECK)
    return work


def script(change: type[object] | object) -> list[ScriptedTurn]:
    """Six rounds of: change the code (each time differently), run the check, try another
    command; the two commands fail the same way every time."""
    turns: list[ScriptedTurn] = []
    for value in range(1, 7):
        turns += [change(value), TEST, OTHER]  # type: ignore[operator]
    return [*turns, say("Done.")]


def loop_events(store: MemoryStore, session_id: str) -> list[object]:
    return [
        r.event for r in store.read(session_id) if isinstance(r.event, LoopDetected | LoopRecovered)
    ]


async def test_edits_between_the_same_two_failures_are_progress(root: Path) -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    loop = make_loop(root, script(write), store=store, clock=clock)
    finished = await loop.run()
    assert finished.reason == "done", finished.detail
    assert loop_events(store, loop.session_id) == []
    assert (root / "calc.py").read_text() == "VALUE = 6\n"


@pytest.mark.system
async def test_commands_that_change_files_are_progress_where_checkpoints_record_them(
    root: Path, tmp_path: Path
) -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    shadow = GitCheckpointer(CheckpointStore(root, tmp_path / "shadow", session="s"))
    loop = make_loop(root, script(shell_write), store=store, clock=clock, checkpointer=shadow)
    finished = await loop.run()
    assert finished.reason == "done", finished.detail
    assert loop_events(store, loop.session_id) == []
    trees = [
        r.event.tree for r in store.read(loop.session_id) if isinstance(r.event, CheckpointCreated)
    ]
    assert len(trees) == 7 and all(trees) and len(set(trees)) == 7


@pytest.mark.system
async def test_a_command_that_puts_the_same_files_back_is_still_a_loop(
    root: Path, tmp_path: Path
) -> None:
    """Two shell edits that alternate the file between two contents, each followed by a check
    failing its own way: the same states keep coming back, so the loop is caught."""
    clock = Clock()
    store = MemoryStore(clock=clock)
    (root / "check.py").write_text(
        "from calc import VALUE\nraise SystemExit(f'error {VALUE}')\n", encoding="utf-8"
    )
    turns = [shell_write(1), TEST, shell_write(2), TEST] * 4
    shadow = GitCheckpointer(CheckpointStore(root, tmp_path / "shadow", session="s"))
    loop = make_loop(root, turns, store=store, clock=clock, checkpointer=shadow)
    finished = await loop.run()
    assert finished.reason == "loop"
    assert any(isinstance(e, LoopRecovered) for e in loop_events(store, loop.session_id))
