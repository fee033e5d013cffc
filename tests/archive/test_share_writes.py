"""Writes logged after a session's newest checkpoint, landed again on a machine whose files
are those of that checkpoint: from the logged diff, kept only when the result has the logged
hash; anything else reported, never guessed."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kestrel.app_share_writes import land_again
from kestrel.protocol.events import (
    CheckpointCreated,
    ErrorOccurred,
    FileChanged,
    SessionStarted,
)
from kestrel.store.sqlite import SQLiteStore
from kestrel.tools.paths import unified_diff


def _digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def _write(path: str, before: str | None, after: str, max_lines: int = 400) -> FileChanged:
    return FileChanged(
        call_id="c1",
        path=path,
        before_hash=_digest(before),
        after_hash=_digest(after),
        diff=unified_diff(path, before, after, max_lines=max_lines),
    )


def _log(tmp_path: Path, *writes: FileChanged) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "log.db")
    store.append("s1", SessionStarted(session_id="s1", task="t", cwd="/", model="m"))
    store.append("s1", CheckpointCreated(checkpoint_id="a" * 40, label="x"))
    for write in writes:
        store.append("s1", write)
    return store


def test_writes_after_the_checkpoint_are_landed_from_their_diffs(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "count.py").write_text("A = 1\nCOUNT = 2\nB = 3\n")
    (root / "done.py").write_text("already\n")
    store = _log(
        tmp_path,
        _write("count.py", "A = 1\nCOUNT = 2\nB = 3\n", "A = 1\nCOUNT = 3\nB = 3\n"),
        _write("new/mod.py", None, "print('hi')\n"),
        _write("done.py", "before\n", "already\n"),  # Landed here already.
    )
    assert land_again(store, "s1", root) == 2
    assert (root / "count.py").read_text() == "A = 1\nCOUNT = 3\nB = 3\n"
    assert (root / "new" / "mod.py").read_text() == "print('hi')\n"
    assert (root / "done.py").read_text() == "already\n"
    assert land_again(store, "s1", root) == 0  # Twice is once.


def test_a_write_that_cannot_be_made_again_is_reported_not_guessed(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    before = "".join(f"line {n}\n" for n in range(50))
    after = "".join(f"line {n} changed\n" for n in range(50))
    (root / "long.txt").write_text(before)
    (root / "other.txt").write_text("changed by something else\n")
    store = _log(
        tmp_path,
        _write("long.txt", before, after, max_lines=10),  # Its diff was cut for length.
        _write("other.txt", "x\n", "y\n"),
        _write("../outside.txt", None, "no\n"),
    )
    assert land_again(store, "s1", root) == 0
    assert (root / "long.txt").read_text() == before
    assert not (tmp_path / "outside.txt").exists()
    errors = [r.event for r in store.read("s1") if isinstance(r.event, ErrorOccurred)]
    assert [e.message.split(":")[0] for e in errors] == ["long.txt", "other.txt", "../outside.txt"]
    assert all(e.recoverable for e in errors)
