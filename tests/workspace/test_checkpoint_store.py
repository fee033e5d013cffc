"""The checkpoint store against real git: recording, listing, diffing and restoring exact trees."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_kit import fingerprint, tree_state, user_git, write

from kestrel.workspace import (
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    FileChange,
    GitFailed,
    UnknownCheckpoint,
)

pytestmark = pytest.mark.system

IGNORED = ("build/", "app.log", "notes.local")
BINARY = bytes(range(256)) * 40


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """Modes written by git depend on the umask; pin the usual one for exact comparisons."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository with one commit, ignored files and a locally excluded file."""
    root = tmp_path / "project"
    write(root, "a.py", "print('a')\n")
    write(root, "src/pkg/mod.py", "x = 1\n")
    write(root, "src/keep.py", "keep = True\n")
    write(root, "script.sh", "#!/bin/sh\necho hi\n")
    write(root, "data.bin", BINARY)
    write(root, "docs/read me é.md", "# notes\n")
    write(root, ".gitignore", "build/\n*.log\n")
    user_git(root, "init", "-q")
    user_git(root, "add", "-A")
    user_git(root, "commit", "-q", "-m", "initial")
    write(root, ".git/info/exclude", "notes.local\n")
    write(root, "build/out.o", b"\x7fELF" + BINARY)
    write(root, "app.log", "started\n")
    write(root, "notes.local", "private\n")
    return root


def store_for(root: Path, **options: str) -> CheckpointStore:
    """A store whose shadow repository sits beside the worktree, never inside it."""
    return CheckpointStore(root, root.parent / "shadow", **options)


def test_rewinding_to_each_checkpoint_restores_the_exact_tree(project: Path) -> None:
    store = store_for(project)
    user_head = user_git(project, "rev-parse", "HEAD")
    user_status = user_git(project, "status", "--porcelain", "--ignored")
    user_repo = fingerprint(project / ".git")
    ignored_files = {p: (project / p).read_bytes() for p in ("build/out.o", "app.log")}

    expected: list[tuple[Checkpoint, dict[str, tuple[str, int, bytes]]]] = []

    def record(label: str) -> Checkpoint:
        checkpoint = store.snapshot(label)
        assert checkpoint is not None
        expected.append((checkpoint, tree_state(project, IGNORED)))
        return checkpoint

    record("start")
    write(project, "a.py", "print('edited')\n")
    record("edit")
    # What a shell command does: remove a directory, create new nested ones, add an ignored file.
    shutil.rmtree(project / "src" / "pkg")
    write(project, "gen/deep/er/out.txt", "generated\n")
    write(project, "gen/top.txt", "top\n")
    write(project, "build/new.o", "new object\n")
    record("command")
    (project / "a.py").rename(project / "b.py")
    record("rename")
    (project / "script.sh").chmod(0o755)
    record("chmod")
    write(project, "data.bin", BINARY[::-1])
    (project / "link").symlink_to("gen/top.txt")
    write(project, "ünï code/with space.txt", "unicode\n")
    record("binary, symlink, unicode")

    assert store.list() == [checkpoint for checkpoint, _ in expected]
    for checkpoint, state in [*expected, *reversed(expected)]:
        store.restore(checkpoint.id)
        assert tree_state(project, IGNORED) == state, checkpoint.label
        assert {p: (project / p).read_bytes() for p in ignored_files} == ignored_files
        assert (project / "build" / "new.o").read_bytes() == b"new object\n"
        assert (project / "notes.local").read_text() == "private\n"
        assert store.snapshot("after restore") is None

    assert fingerprint(project / ".git") == user_repo
    assert user_git(project, "rev-parse", "HEAD") == user_head
    store.restore(expected[0][0].id)
    assert user_git(project, "status", "--porcelain", "--ignored") == user_status
    assert not (project / "gen").exists()


def test_changes_are_listed_relative_to_the_previous_checkpoint(project: Path) -> None:
    store = store_for(project)
    first = store.snapshot("start")
    assert first is not None
    assert {change.path for change in first.changes} == {
        ".gitignore",
        "a.py",
        "data.bin",
        "docs/read me é.md",
        "script.sh",
        "src/keep.py",
        "src/pkg/mod.py",
    }
    (project / "a.py").rename(project / "renamed.py")
    (project / "src" / "keep.py").unlink()
    write(project, "docs/read me é.md", "# changed\n")
    (project / "script.sh").chmod(0o755)
    write(project, "new.txt", "new\n")
    second = store.snapshot("mixed")
    assert second is not None
    assert sorted(second.changes, key=lambda c: c.path) == [
        FileChange("docs/read me é.md", "M"),
        FileChange("new.txt", "A"),
        FileChange("renamed.py", "R", old_path="a.py"),
        FileChange("script.sh", "M"),
        FileChange("src/keep.py", "D"),
    ]
    assert store.list()[-1] == second


def test_a_snapshot_without_changes_returns_none(project: Path) -> None:
    store = store_for(project)
    assert store.snapshot("one") is not None
    assert store.snapshot("two") is None
    write(project, "build/ignored.o", "ignored\n")
    write(project, "more.log", "ignored\n")
    assert store.snapshot("three") is None
    assert [c.label for c in store.list()] == ["one"]


def test_restore_is_recorded_and_saves_unrecorded_work_first(project: Path) -> None:
    store = store_for(project, session="s1")
    start = store.snapshot("start")
    assert start is not None
    write(project, "a.py", "unrecorded\n")
    rewind = store.restore(start.id[:8])
    assert rewind is not None
    assert rewind.tree == start.tree
    assert [c.label for c in store.list()] == [
        "start",
        f"before rewind to {start.id[:12]}",
        f"rewind to {start.id[:12]}",
    ]
    saved = store.list()[1]
    assert "+unrecorded" in store.diff(start.id, saved.id)
    assert store.restore(start.id) is None


def test_diff_between_checkpoints_and_against_the_worktree(project: Path) -> None:
    store = store_for(project)
    start = store.snapshot("start")
    assert start is not None
    write(project, "a.py", "print('b')\n")
    edited = store.snapshot("edit")
    assert edited is not None
    between = store.diff(start.id, edited.id)
    assert "--- a/a.py\n+++ b/a.py\n" in between
    assert "-print('a')\n+print('b')\n" in between
    write(project, "fresh.txt", "fresh\n")
    to_worktree = store.diff(edited.id)
    assert "+++ b/fresh.txt" in to_worktree
    assert "a.py" not in to_worktree


def test_a_worktree_that_is_not_a_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "one.txt", "1\n")
    store = store_for(root)
    first = store.snapshot("first")
    write(root, "two/three.txt", "3\n")
    (root / "one.txt").unlink()
    assert store.snapshot("second") is not None
    assert first is not None
    store.restore(first.id)
    assert tree_state(root) == {"one.txt": ("file", 0o644, b"1\n")}
    assert not (root / ".git").exists()


def test_an_empty_worktree(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    store = store_for(root)
    first = store.snapshot("empty")
    assert first is not None
    assert first.changes == ()
    assert store.snapshot("still empty") is None
    write(root, "x.txt", "x\n")
    assert store.snapshot("x") is not None
    store.restore(first.id)
    assert list(root.iterdir()) == []


def test_unknown_ids_are_typed_errors(tmp_path: Path, project: Path) -> None:
    store = store_for(project, session="mine")
    with pytest.raises(UnknownCheckpoint):
        store.restore("0123abcd")
    store.snapshot("start")
    other = store_for(project, session="theirs")
    write(project, "theirs.txt", "t\n")
    theirs = other.snapshot("theirs")
    assert theirs is not None
    for wrong in ("0123abcd", "HEAD", "--help", "", theirs.id):
        with pytest.raises(UnknownCheckpoint):
            store.restore(wrong)
    with pytest.raises(UnknownCheckpoint):
        store.diff("deadbeef")
    assert issubclass(UnknownCheckpoint, CheckpointError)


def test_git_failures_carry_gits_message(project: Path) -> None:
    store = store_for(project)
    store.snapshot("start")
    lock = store.git_dir / "kestrel-index" / "default.lock"
    lock.write_text("")
    write(project, "a.py", "changed\n")
    with pytest.raises(GitFailed, match=r"index\.lock|default\.lock"):
        store.snapshot("blocked")
    lock.unlink()
    assert store.snapshot("unblocked") is not None
    with pytest.raises(CheckpointError, match="cannot run"):
        CheckpointStore(project, project.parent / "other", git="/nonexistent/git").snapshot("x")


def test_the_shadow_repository_must_lie_outside_the_worktree(project: Path) -> None:
    with pytest.raises(CheckpointError):
        CheckpointStore(project, project / ".kestrel" / "shadow")
    with pytest.raises(CheckpointError):
        CheckpointStore(project, project.parent / "shadow", session="../escape")


def test_odd_file_names_survive_listing(tmp_path: Path) -> None:
    root = tmp_path / "odd"
    names = ["line\nbreak.txt", "\x01" + "a" * 40 + " b 1\nlabel", "tab\there", "R100", "-rf"]
    for name in names:
        write(root, name, name)
    store = store_for(root)
    first = store.snapshot("label with\nnewline and \x01 control")
    assert first is not None
    assert sorted(change.path for change in first.changes) == sorted(names)
    assert store.list() == [first]
    (root / "R100").rename(root / "renamed\n")
    second = store.snapshot("rename")
    assert second is not None
    assert second.changes == (FileChange("renamed\n", "R", old_path="R100"),)
    assert store.list() == [first, second]
