"""A first checkpoint seeded from the checkout's own index records what an unseeded one would."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_kit import fingerprint, tree_state, user_git, write

from kestrel.workspace import CheckpointStore
from kestrel.workspace.checkpoint_seed import seed_index
from kestrel.workspace.shadow_git import ShadowGit, init_shadow, shadow_env

pytestmark = pytest.mark.system


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """Modes written by git depend on the umask; pin the usual one for exact comparisons."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def committed_repo(root: Path) -> Path:
    """A checkout with a few committed files, a symlink and an ignore file."""
    write(root, ".gitignore", "*.log\nbuild/\n")
    write(root, "README.md", "hello\n")
    write(root, "src/app.py", "print('app')\n")
    write(root, "src/util.py", "def util():\n    return 1\n")
    write(root, "src/gone.py", "old = True\n")
    write(root, "src/staged_gone.py", "older = True\n")
    write(root, "run.sh", "#!/bin/sh\necho run\n")
    (root / "link-to-readme").symlink_to("README.md")
    user_git(root, "init", "-q")
    user_git(root, "add", "--all")
    user_git(root, "commit", "-q", "-m", "initial")
    return root


def dirty_repo(root: Path) -> Path:
    """Staged, unstaged, untracked, ignored, deleted, mode and symlink changes, uncommitted."""
    committed_repo(root)
    write(root, "src/app.py", "print('staged')\n")
    user_git(root, "add", "src/app.py")
    write(root, "src/util.py", "def util():\n    return 2\n")  # unstaged
    write(root, "notes/new.txt", "untracked\n")
    write(root, "debug.log", "ignored\n")
    write(root, "build/out.bin", b"\x00ignored")
    (root / "src" / "gone.py").unlink()  # deleted, not staged
    user_git(root, "rm", "-q", "src/staged_gone.py")  # deleted, staged
    (root / "run.sh").chmod(0o755)  # executable bit, not staged
    (root / "link-to-src").symlink_to("src")  # a new symlink to a directory
    write(root, "staged_new.py", "x = 1\n")
    user_git(root, "add", "staged_new.py")
    return root


def seeded_and_plain(root: Path, tmp_path: Path) -> tuple[CheckpointStore, CheckpointStore]:
    return (
        CheckpointStore(root, tmp_path / "seeded", session="a"),
        CheckpointStore(root, tmp_path / "plain", session="a", seed=False),
    )


def probe_git(root: Path, shadow: Path) -> ShadowGit:
    """A shadow repository's git with a private index at `shadow/probe-index`."""
    init_shadow("git", shadow, os.environ)
    index = shadow / "probe-index"
    env = shadow_env(
        git_dir=shadow, worktree=root, index_file=index, excludes_file=None, base=os.environ
    )
    return ShadowGit("git", root, env)


def packs(shadow: Path) -> list[Path]:
    return sorted((shadow / "objects" / "pack").glob("*.pack"))


def test_the_seeded_first_checkpoint_records_the_unseeded_tree(tmp_path: Path) -> None:
    root = dirty_repo(tmp_path / "project")
    before = fingerprint(root / ".git")
    seeded, plain = seeded_and_plain(root, tmp_path)
    first = seeded.snapshot("first")
    reference = plain.snapshot("first")
    assert first is not None and reference is not None
    assert first.tree == reference.tree
    assert {change.path for change in first.changes} == {c.path for c in reference.changes}
    assert "debug.log" not in {change.path for change in first.changes}
    assert packs(tmp_path / "seeded"), "the checkout's objects were copied into one pack"
    assert not packs(tmp_path / "plain")
    assert fingerprint(root / ".git") == before


def test_later_checkpoints_and_a_restore_after_a_seed(tmp_path: Path) -> None:
    root = dirty_repo(tmp_path / "project")
    seeded, plain = seeded_and_plain(root, tmp_path)
    first = seeded.snapshot("first")
    plain.snapshot("first")
    assert first is not None
    expected = tree_state(root, ignored=("debug.log", "build/"))
    write(root, "README.md", "changed\n")
    (root / "src" / "app.py").unlink()
    write(root, "fresh/module.py", "y = 2\n")
    second = seeded.snapshot("second")
    reference = plain.snapshot("second")
    assert second is not None and reference is not None
    assert second.tree == reference.tree
    assert {c.path for c in second.changes} == {"README.md", "src/app.py", "fresh/module.py"}
    seeded.restore(first.id)
    assert tree_state(root, ignored=("debug.log", "build/")) == expected
    assert (root / "debug.log").read_text() == "ignored\n"


def test_a_file_changed_in_the_second_its_index_was_written_is_read_again(
    tmp_path: Path,
) -> None:
    root = committed_repo(tmp_path / "project")
    write(root, "README.md", "aaaaa\n")
    user_git(root, "add", "README.md")
    write(root, "README.md", "bbbbb\n")  # same size, most likely the same second
    seeded, plain = seeded_and_plain(root, tmp_path)
    first, reference = seeded.snapshot("first"), plain.snapshot("first")
    assert first is not None and reference is not None
    assert first.tree == reference.tree


def test_files_the_checkouts_git_was_told_not_to_look_at_are_still_read(tmp_path: Path) -> None:
    root = committed_repo(tmp_path / "project")
    user_git(root, "update-index", "--assume-unchanged", "README.md")
    user_git(root, "update-index", "--skip-worktree", "src/util.py")
    time.sleep(0.01)
    write(root, "README.md", "changed behind git's back\n")
    write(root, "src/util.py", "also changed\n")
    seeded, plain = seeded_and_plain(root, tmp_path)
    first, reference = seeded.snapshot("first"), plain.snapshot("first")
    assert first is not None and reference is not None
    assert first.tree == reference.tree


def test_a_tracked_file_that_an_ignore_rule_matches_is_recorded(tmp_path: Path) -> None:
    root = committed_repo(tmp_path / "project")
    write(root, "keep.log", "tracked on purpose\n")
    user_git(root, "add", "--force", "keep.log")
    first = CheckpointStore(root, tmp_path / "seeded").snapshot("first")
    assert first is not None
    assert "keep.log" in {change.path for change in first.changes}


def test_the_copied_objects_outlive_a_gc_of_the_checkout(tmp_path: Path) -> None:
    root = committed_repo(tmp_path / "project")
    write(root, "draft.txt", "staged once, never committed\n")
    user_git(root, "add", "draft.txt")
    store = CheckpointStore(root, tmp_path / "seeded")
    first = store.snapshot("first")
    assert first is not None
    # The blob lived only as a loose object of the checkout; drop it and collect the garbage.
    user_git(root, "rm", "-q", "--cached", "draft.txt")
    (root / "draft.txt").unlink()
    user_git(root, "gc", "-q", "--prune=now")
    store.restore(first.id)
    assert (root / "draft.txt").read_text() == "staged once, never committed\n"


def test_a_linked_worktree_is_seeded_from_its_own_index(tmp_path: Path) -> None:
    main = committed_repo(tmp_path / "project")
    linked = tmp_path / "linked"
    user_git(main, "worktree", "add", "-q", "--detach", str(linked))
    write(linked, "src/app.py", "print('linked')\n")
    write(linked, "only-here.log", "ignored by the shared .gitignore\n")
    seeded, plain = seeded_and_plain(linked, tmp_path)
    first, reference = seeded.snapshot("first"), plain.snapshot("first")
    assert first is not None and reference is not None
    assert first.tree == reference.tree
    assert packs(tmp_path / "seeded")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "missing", "split"])
def test_an_unusable_index_falls_back_to_hashing_every_file(tmp_path: Path, damage: str) -> None:
    root = dirty_repo(tmp_path / "project")
    index = root / ".git" / "index"
    data = index.read_bytes()
    if damage == "garbage":
        index.write_bytes(b"not an index at all")
    elif damage == "truncated":
        index.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        index.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "missing":
        index.unlink()
    else:
        user_git(root, "update-index", "--split-index")
    seeded, plain = seeded_and_plain(root, tmp_path)
    probe = tmp_path / "probe"
    reason = seed_index(probe_git(root, probe), probe, probe / "probe-index", root)
    assert reason is not None and "index" in reason
    assert not (tmp_path / "probe" / "probe-index").exists()
    first, reference = seeded.snapshot("first"), plain.snapshot("first")
    assert first is not None and reference is not None
    assert first.tree == reference.tree
    assert not packs(tmp_path / "seeded")


def test_a_worktree_that_is_no_checkout_is_not_seeded(tmp_path: Path) -> None:
    root = tmp_path / "plain folder"
    write(root, "a.txt", "a\n")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    assert first is not None
    assert [change.path for change in first.changes] == ["a.txt"]
