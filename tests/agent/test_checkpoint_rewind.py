"""Checkpoints after every change, commands included, and rewinding files and conversation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from loop_kit import make_loop

from kestrel.agent.session import CheckpointNotFound, rewind
from kestrel.app import GitCheckpointer
from kestrel.models.scripted import call, say
from kestrel.protocol.events import CheckpointCreated, Rewound
from kestrel.workspace import CheckpointStore

pytestmark = pytest.mark.system


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file's bytes and executable bit, by relative path."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), os.access(p, os.X_OK))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


SCRIPT = [
    call("read_file", path="a.txt"),
    call("edit_file", path="a.txt", old_str="one", new_str="two"),
    call("bash", command="rm b.txt && mkdir -p new/dir && echo made > new/dir/c.txt"),
    call("write_file", path="d.sh", content="#!/bin/sh\necho d\n"),
    call("bash", command="chmod +x d.sh && mv a.txt renamed.txt"),
    say("done"),
]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / "b.txt").write_text("bee\n")
    return root


def checkpointer(tmp_path: Path, root: Path) -> GitCheckpointer:
    return GitCheckpointer(CheckpointStore(root, tmp_path / "shadow", session="s"))


async def test_every_change_is_checkpointed_and_each_can_be_restored(
    tmp_path: Path, work: Path
) -> None:
    d_sh = b"#!/bin/sh\necho d\n"
    made = {"new/dir/c.txt": (b"made\n", False)}
    trees = [
        {"a.txt": (b"one\n", False), "b.txt": (b"bee\n", False)},
        {"a.txt": (b"two\n", False), "b.txt": (b"bee\n", False)},
        {"a.txt": (b"two\n", False), **made},
        {"a.txt": (b"two\n", False), **made, "d.sh": (d_sh, False)},
        {"renamed.txt": (b"two\n", False), **made, "d.sh": (d_sh, True)},
    ]
    loop = make_loop(work, SCRIPT, checkpointer=checkpointer(tmp_path, work))
    assert (await loop.run()).reason == "done"
    assert tree(work) == trees[-1]
    events = [r.event for r in loop.store.read(loop.session_id)]
    marks = [e for e in events if isinstance(e, CheckpointCreated)]
    assert [m.label for m in marks] == [
        "before the first change",
        "after edit_file",
        "after bash",
        "after write_file",
        "after bash",
    ]
    assert [(c.status, c.path) for c in marks[2].changes] == [
        ("D", "b.txt"),
        ("A", "new/dir/c.txt"),
    ]
    assert len(trees) == len(marks)

    for mark, expected in reversed(list(zip(marks, trees, strict=True))):
        await rewind(loop.state, loop.emit, loop.checkpointer, mark.checkpoint_id[:10])  # type: ignore[arg-type]
        assert tree(work) == expected, mark.label
    for mark, expected in zip(marks, trees, strict=True):
        await rewind(loop.state, loop.emit, loop.checkpointer, mark.checkpoint_id)  # type: ignore[arg-type]
        assert tree(work) == expected, mark.label


async def test_the_conversation_continues_from_the_checkpoint(tmp_path: Path, work: Path) -> None:
    loop = make_loop(work, SCRIPT, checkpointer=checkpointer(tmp_path, work))
    await loop.run()
    after_edit = next(
        r.event
        for r in loop.store.read(loop.session_id)
        if isinstance(r.event, CheckpointCreated) and r.event.label == "after edit_file"
    )
    rewound = await rewind(loop.state, loop.emit, loop.checkpointer, after_edit.checkpoint_id)  # type: ignore[arg-type]
    assert isinstance(rewound, Rewound)
    assert tree(work) == {"a.txt": (b"two\n", False), "b.txt": (b"bee\n", False)}
    # The model sees the conversation up to the edit's result, with a note about the rewind.
    assert [m.role for m in loop.state.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert "rewound the files" in loop.state.messages[-1].content  # type: ignore[union-attr]

    # The scripted model picks up at turn 2 again, reusing call ids: they must run again.
    finished = await loop.send("carry on")
    assert finished.reason == "done"
    assert tree(work)["renamed.txt"] == (b"two\n", False)
    assert (work / "d.sh").exists() and os.access(work / "d.sh", os.X_OK)
    assert not (work / "b.txt").exists()


async def test_an_unknown_checkpoint_is_a_clear_error(tmp_path: Path, work: Path) -> None:
    loop = make_loop(work, SCRIPT, checkpointer=checkpointer(tmp_path, work))
    with pytest.raises(CheckpointNotFound, match="checkpoints: none yet"):
        await rewind(loop.state, loop.emit, loop.checkpointer, "abc")  # type: ignore[arg-type]


async def test_a_failing_checkpointer_is_logged_and_the_session_goes_on(work: Path) -> None:
    class Broken:
        async def snapshot(self, label: str) -> None:
            from kestrel.workspace import CheckpointError

            raise CheckpointError("disk full")

        async def restore(self, checkpoint_id: str) -> None:
            raise AssertionError("not called")

    loop = make_loop(work, SCRIPT, checkpointer=Broken())
    assert (await loop.run()).reason == "done"
    errors = [r.event for r in loop.store.read(loop.session_id) if r.event.type == "error"]
    assert errors and all(e.recoverable for e in errors)  # type: ignore[union-attr]
