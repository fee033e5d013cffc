"""Failing results that oscillate between two states: caught, undone once, then stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cost_kit import Clock, RecordingStreamer, make_loop

from kestrel.agent.loops import OscillationDetector
from kestrel.agent.state import replay
from kestrel.app import GitCheckpointer
from kestrel.models.scripted import ScriptedTurn, call
from kestrel.protocol.events import (
    CheckpointCreated,
    LoopDetected,
    LoopRecovered,
    ModelRequestStarted,
)
from kestrel.protocol.messages import AssistantTurn, ToolResultTurn, UserTurn
from kestrel.store import MemoryStore
from kestrel.workspace import CheckpointStore

CHECK = """\
from calc import VALUE
if VALUE == 1:
    raise SystemExit("error X: the total is too small")
if VALUE == 2:
    raise SystemExit("error Y: the total is too large")
print("ok")
"""


def edit(value: int) -> ScriptedTurn:
    return call("write_file", path="calc.py", content=f"VALUE = {value}\n")


TEST = call("bash", command="python3 check.py")
# Look around, then edit A, fail with X, edit B, fail with Y, and round again.
SCRIPT = [call("read_file", path="calc.py"), *[edit(1), TEST, edit(2), TEST] * 2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    (work / "calc.py").write_text("VALUE = 0\n")
    (work / "check.py").write_text(CHECK)
    return work


def streamer(root: Path) -> RecordingStreamer:
    return RecordingStreamer(SCRIPT, look=lambda: (root / "calc.py").read_text())


def text_of(message: object) -> str:
    if isinstance(message, AssistantTurn):
        return message.text + "".join(c.arguments for c in message.tool_calls)
    if isinstance(message, ToolResultTurn):
        return message.content
    assert isinstance(message, UserTurn)
    return message.text


async def test_the_loop_is_undone_once_with_a_note_then_stops(root: Path) -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    model = streamer(root)
    loop = make_loop(root, model, store=store, clock=clock)
    finished = await loop.run()

    assert finished.reason == "loop"
    assert "again after going back once" in finished.detail
    records = store.read(loop.session_id)
    events = [r.event for r in records]
    recovered = [e for e in events if isinstance(e, LoopRecovered)]
    assert len(recovered) == 1
    recovery = recovered[0]
    assert recovery.pattern == "oscillate"
    assert "'error X: the total is too small'" in recovery.detail
    assert "'error Y: the total is too large'" in recovery.detail
    requests = [e for e in events if isinstance(e, ModelRequestStarted)]
    # Back to the request that made the first edit (the second one), not to the task itself.
    assert recovery.to_seq == next(r.seq for r in records if r.event is requests[1])
    assert recovery.checkpoint_id is None
    assert "the files were not restored" in recovery.note
    stops = [e for e in events if isinstance(e, LoopDetected)]
    assert [(s.pattern, s.action) for s in stops] == [("oscillate", "stop")]

    # Nine requests made the first loop; the tenth is the first after the recovery.
    assert len(model.requests) == 9 + 8  # The second time round it starts at the first edit.
    after = model.requests[9]
    prompt = "\n".join(text_of(m) for m in after.messages)
    assert prompt.count(recovery.note) == 1
    # Outside the note, which names the two failures, nothing of the looping turns is left.
    looped = prompt.replace(recovery.note, "")
    assert "error X" not in looped and "error Y" not in looped and "exit code" not in looped
    assert "VALUE = 1" not in looped and "VALUE = 2" not in looped
    assert sum(isinstance(m, AssistantTurn) for m in after.messages) == 1
    # The prompt is the one the first edit was asked with, plus the note.
    assert list(after.messages[:-1]) == list(model.requests[1].messages[:-1])
    last = after.messages[-1]
    assert isinstance(last, ToolResultTurn)
    assert last.content.startswith(text_of(model.requests[1].messages[-1]))
    assert last.content.endswith(recovery.note)
    assert "take a different approach" in recovery.note

    # A resumed session folds the log to the same conversation.
    recovered_at = next(x.seq for x in records if x.event is recovery)
    upto = [r for r in records if r.seq <= recovered_at]
    assert replay(upto).messages == list(after.messages)


@pytest.mark.system
async def test_the_files_go_back_too_where_a_checkpoint_holds_them(
    root: Path, tmp_path: Path
) -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    model = streamer(root)
    shadow = GitCheckpointer(CheckpointStore(root, tmp_path / "shadow", session="s"))
    loop = make_loop(root, model, store=store, clock=clock, checkpointer=shadow)
    finished = await loop.run()

    assert finished.reason == "loop"
    events = [r.event for r in store.read(loop.session_id)]
    recovery = next(e for e in events if isinstance(e, LoopRecovered))
    baseline = next(e for e in events if isinstance(e, CheckpointCreated))
    assert baseline.label == "before the first change"
    assert recovery.checkpoint_id == baseline.checkpoint_id
    assert "the files were restored to how they were then" in recovery.note
    # What calc.py held as each request began: the recovery put the original back.
    assert model.seen[8] == "VALUE = 2\n"
    assert model.seen[9] == "VALUE = 0\n"


def observe(detector: OscillationDetector, steps: list[tuple[str, str | None]]) -> list[str]:
    """Feed (call, failure) steps; None is a success. Returns the loop's first call, if any."""
    found = []
    for i, (key, failure) in enumerate(steps):
        verdict = detector.observe(
            f"c{i}", key, failure or "ok", failure or "", failed=failure is not None
        )
        if verdict is not None:
            found.append(verdict.first_call)
    return found


def test_two_failures_in_turn_are_a_loop_from_the_edit_that_led_there() -> None:
    steps: list[tuple[str, str | None]] = [("read", None), ("look", None)]
    steps += [("edit a", None), ("test", "X"), ("edit b", None), ("test", "Y")] * 2
    assert observe(OscillationDetector(4), steps) == ["c2"]


def test_a_passing_check_or_one_repeated_failure_is_no_loop() -> None:
    passing: list[tuple[str, str | None]] = [("test", "X"), ("test", "Y"), ("test", None)]
    passing += [("test", "X"), ("test", "Y"), ("test", "X")]
    assert observe(OscillationDetector(4), passing) == []
    same: list[tuple[str, str | None]] = [("edit", None), ("test", "X")] * 5
    assert observe(OscillationDetector(4), same) == []
    three: list[tuple[str, str | None]] = [("test", "X"), ("test", "Y"), ("test", "Z")] * 2
    assert observe(OscillationDetector(4), three) == []


def test_the_scripted_steps_are_what_the_test_above_replays() -> None:
    assert [json.loads(t.tool_calls[0][1]).get("content") for t in SCRIPT[1:5]] == [
        "VALUE = 1\n",
        None,
        "VALUE = 2\n",
        None,
    ]
