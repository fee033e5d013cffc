"""The change a session made, read from two checkpoints: every kind of change, with content."""

from __future__ import annotations

import os
from pathlib import Path

from kestrel.workspace import CheckpointStore
from kestrel.workspace.changes import Entry
from kestrel.workspace.review import summary_line


def _store(tmp_path: Path) -> tuple[Path, CheckpointStore]:
    work = tmp_path / "work"
    work.mkdir()
    return work, CheckpointStore(work, tmp_path / "shadow", session="s1")


def test_every_kind_of_change_is_read_with_both_sides(tmp_path: Path) -> None:
    work, store = _store(tmp_path)
    (work / "a.txt").write_text("a\n")
    (work / "old.txt").write_text("a line long enough to be seen as renamed\n" * 5)
    (work / "gone.txt").write_text("x")
    (work / "run.sh").write_text("echo hi\n")
    store.snapshot("start")
    (work / "a.txt").write_text("b\n")
    os.rename(work / "old.txt", work / "new.txt")
    os.unlink(work / "gone.txt")
    os.chmod(work / "run.sh", 0o755)
    os.symlink("a.txt", work / "link")
    (work / "d").mkdir()
    (work / "d" / "f.txt").write_bytes(b"\x00binary\xff")
    store.snapshot("after")

    changes = {c.path: c for c in store.change_set().changes}

    assert changes["a.txt"].status == "M"
    assert changes["a.txt"].base == Entry("file", b"a\n")
    assert changes["a.txt"].new == Entry("file", b"b\n")
    assert changes["new.txt"].status == "R"
    assert changes["new.txt"].old_path == "old.txt"
    assert changes["old.txt"].status == "D"
    assert changes["gone.txt"].new is None
    assert changes["run.sh"].status == "T"
    assert changes["run.sh"].new == Entry("file", b"echo hi\n", executable=True)
    assert changes["link"].new == Entry("symlink", b"a.txt")
    assert changes["d/f.txt"].new == Entry("file", b"\x00binary\xff")
    assert summary_line(store.change_set()) == (
        "6 files: 1 modified, 2 added, 1 deleted, 1 renamed, 1 mode changed"
    )


def test_a_change_can_start_at_a_later_checkpoint(tmp_path: Path) -> None:
    work, store = _store(tmp_path)
    (work / "a.txt").write_text("1\n")
    store.snapshot("start")
    (work / "a.txt").write_text("2\n")
    middle = store.snapshot("middle")
    assert middle is not None
    (work / "b.txt").write_text("b\n")
    store.snapshot("end")

    assert store.change_set(middle.id).paths() == ("b.txt",)
    assert store.change_set().paths() == ("a.txt", "b.txt")


def test_no_checkpoint_means_no_change(tmp_path: Path) -> None:
    _, store = _store(tmp_path)
    assert not store.change_set()
    assert store.head_id() is None
