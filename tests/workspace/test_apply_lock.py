"""The per-session apply lock across processes, and repairing an apply a killed process left."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from apply_kit import Crash, crash_at, materialize, text
from apply_kit import snapshot as files_of

from kestrel.protocol.codec import event_to_dict
from kestrel.protocol.events import ChangesApplied, SessionStarted
from kestrel.store.memory import MemoryStore
from kestrel.workspace.apply import apply_changes
from kestrel.workspace.apply_lock import (
    ApplyBusy,
    Marker,
    finish_interrupted,
    session_lock,
    write_marker,
)
from kestrel.workspace.changes import Change, ChangeSet
from kestrel.workspace.journal import ApplyError
from kestrel.workspace.overlay import layer_for

SID = "s1"
OLD = {"a.txt": text("a\n"), "b.txt": text("b\n"), "c.txt": text("c\n")}
CHANGES = ChangeSet(
    tuple(Change(path, OLD[path], text(path.upper() + "\n")) for path in sorted(OLD))
)
NEW_FILES = {path: (path.upper() + "\n").encode() for path in OLD}

_HOLDER = """
import sys
from pathlib import Path
from kestrel.workspace.apply_lock import session_lock
with session_lock(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _contents(root: Path) -> dict[str, bytes]:
    return {path: (root / path).read_bytes() for path in OLD}


def _store() -> MemoryStore:
    store = MemoryStore()
    store.append(SID, SessionStarted(session_id=SID, task="t", cwd="/p", model="scripted:m"))
    return store


def _applied_events(store: MemoryStore) -> list[ChangesApplied]:
    return [r.event for r in store.read(SID) if isinstance(r.event, ChangesApplied)]


def test_a_lock_held_by_another_process_makes_the_second_wait_then_give_up(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path), SID],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = pytest.raises(ApplyBusy, match="another kestrel process is applying")
        with busy, session_lock(tmp_path, SID, wait_s=0.2):
            pass
        with session_lock(tmp_path, "another-session", wait_s=0):
            pass  # one lock per session
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    with session_lock(tmp_path, SID, wait_s=0) as waited:  # released when its process ended
        assert waited is False
        with session_lock(tmp_path, SID, wait_s=0):
            pass  # this process may take its own lock again


def _crashed_apply(tmp_path: Path, step: str) -> tuple[Path, Path, Marker]:
    checkout = materialize(tmp_path / "checkout", OLD)
    journal = tmp_path / "journal"
    event = ChangesApplied(outcome="applied", checkpoint_id="head", written=tuple(sorted(OLD)))
    marker = Marker(
        session_id=SID,
        checkout=str(checkout),
        journal=str(journal),
        named=None,
        phase="applying",
        event=event_to_dict(event),
    )
    with pytest.raises(Crash):
        apply_changes(checkout, CHANGES, journal, fault=crash_at(step))
    return checkout, journal, marker


def test_a_marker_left_by_a_killed_apply_is_finished_and_logged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    layer = layer_for(data, SID)
    layer.upper.mkdir(parents=True)
    checkout, _, marker = _crashed_apply(tmp_path, "op:1")
    assert _contents(checkout) != NEW_FILES and _contents(checkout) != {
        p: e.data for p, e in OLD.items()
    }
    write_marker(data, marker)
    store = _store()
    repaired = finish_interrupted(data, store)
    assert [(r.session_id, r.action) for r in repaired] == [(SID, "completed")]
    assert _contents(checkout) == NEW_FILES
    assert [e.outcome for e in _applied_events(store)] == ["applied"]
    assert not layer.root.exists()  # the change is in the checkout: its layer is done
    assert finish_interrupted(data, store) == []  # the marker is gone
    assert not any(name.startswith(".") for name in files_of(checkout))


def test_a_finished_apply_whose_event_was_logged_is_not_logged_twice(tmp_path: Path) -> None:
    data = tmp_path / "data"
    checkout, _, marker = _crashed_apply(tmp_path, "cleanup")
    assert _contents(checkout) == NEW_FILES
    store = _store()
    store.append(SID, marker.applied())
    write_marker(data, dataclasses.replace(marker, phase="performed"))
    assert [r.action for r in finish_interrupted(data, store)] == ["completed"]
    assert len(_applied_events(store)) == 1


def test_an_apply_killed_before_its_journal_committed_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    layer = layer_for(data, SID)
    layer.upper.mkdir(parents=True)
    checkout, _, marker = _crashed_apply(tmp_path, "staged")
    write_marker(data, marker)
    store = _store()
    assert finish_interrupted(data, store) == []
    assert _contents(checkout) == {p: e.data for p, e in OLD.items()}
    assert _applied_events(store) == []
    assert layer.upper.is_dir()  # the change still waits in its layer
    assert not (data / "applies" / f"{SID}.json").exists()


def test_a_journal_that_reached_the_checkout_by_another_path_is_recovered(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    checkout, _, marker = _crashed_apply(tmp_path, "op:0")
    moved = tmp_path / "seen-from-outside"
    checkout.rename(moved)  # as a namespace's bind of the checkout is its real path outside
    write_marker(
        data, dataclasses.replace(marker, checkout=str(moved), named=str(checkout.resolve()))
    )
    assert [r.action for r in finish_interrupted(data, _store())] == ["completed"]
    assert _contents(moved) == NEW_FILES


def test_a_live_apply_is_left_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    checkout, _, marker = _crashed_apply(tmp_path, "op:1")
    write_marker(data, marker)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data), SID],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _contents(checkout)
        assert finish_interrupted(data, _store()) == []
        assert _contents(checkout) == before
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    assert [r.action for r in finish_interrupted(data, _store())] == ["completed"]


def test_a_marker_whose_checkout_is_gone_is_dropped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    marker = _crashed_apply(tmp_path, "op:1")[2]
    write_marker(data, dataclasses.replace(marker, checkout=str(tmp_path / "removed")))
    assert finish_interrupted(data, _store()) == []
    assert not (data / "applies" / f"{SID}.json").exists()


def test_a_journal_that_cannot_be_replayed_is_one_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _, journal, marker = _crashed_apply(tmp_path, "op:1")
    (next(journal.glob("*/journal.json"))).write_text("{not json")
    write_marker(data, marker)
    with pytest.raises(ApplyError, match=r"cut short and its journal cannot be replayed") as error:
        finish_interrupted(data, _store())
    assert "Errno" not in str(error.value) and "PosixPath" not in str(error.value)
    assert (data / "applies" / f"{SID}.json").exists()  # tried again by the next command
