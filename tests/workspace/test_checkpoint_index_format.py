"""The index reader and writer that seed checkpoints, checked against real git's own files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from checkpoint_kit import USER_GIT_ENV, user_git, write

from kestrel.workspace.git_index import (
    IndexEntry,
    IndexUnusable,
    parse_index,
    usable_path,
    write_index,
)

pytestmark = pytest.mark.system


def repo_with_files(root: Path) -> Path:
    write(root, "a.txt", "a\n")
    write(root, "deep/er/b.py", "b = 1\n")
    write(root, "x" * 200 + ".txt", "long name\n")
    write(root, "run.sh", "#!/bin/sh\n").chmod(0o755)
    (root / "link").symlink_to("a.txt")
    user_git(root, "init", "-q")
    user_git(root, "add", "--all")
    user_git(root, "commit", "-q", "-m", "initial")
    return root


def index_bytes(root: Path) -> bytes:
    return (root / ".git" / "index").read_bytes()


def staged(root: Path, index: Path) -> str:
    """`git ls-files --stage` of an index file, read by the user's git."""
    env = {**USER_GIT_ENV, "GIT_INDEX_FILE": str(index)}
    done = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_every_index_version_reads_the_same_entries(tmp_path: Path, version: str) -> None:
    root = repo_with_files(tmp_path / "repo")
    reference = parse_index(index_bytes(root))
    user_git(root, "update-index", "--index-version", version)
    parsed = parse_index(index_bytes(root))
    assert parsed.entries == reference.entries
    assert [entry.path for entry in parsed.entries] == [
        b"a.txt",
        b"deep/er/b.py",
        b"link",
        b"run.sh",
        b"x" * 200 + b".txt",
    ]
    assert {entry.mode for entry in parsed.entries} == {0o100644, 0o100755, 0o120000}


def test_git_reads_a_written_index_as_the_original(tmp_path: Path) -> None:
    root = repo_with_files(tmp_path / "repo")
    user_git(root, "status")  # gives the index its cached trees
    parsed = parse_index(index_bytes(root))
    assert parsed.tree_oids, "the cached trees' ids are read"
    copy = tmp_path / "copy-index"
    copy.write_bytes(write_index(parsed.entries))
    assert staged(root, copy) == staged(root, root / ".git" / "index")
    assert parse_index(copy.read_bytes()) == parse_index(copy.read_bytes())
    assert parse_index(copy.read_bytes()).tree_oids == ()


def test_entries_git_was_told_to_skip_are_left_out(tmp_path: Path) -> None:
    root = repo_with_files(tmp_path / "repo")
    user_git(root, "update-index", "--assume-unchanged", "a.txt")
    user_git(root, "update-index", "--skip-worktree", "run.sh")
    write(root, "later.txt", "intent\n")
    user_git(root, "add", "--intent-to-add", "later.txt")
    write(root, "sub/inner.txt", "inner\n")
    user_git(root / "sub", "init", "-q")
    user_git(root / "sub", "add", "inner.txt")
    user_git(root / "sub", "commit", "-q", "-m", "sub")
    user_git(root, "add", "sub")
    parsed = parse_index(index_bytes(root))
    paths = [entry.path for entry in parsed.entries]
    assert b"a.txt" not in paths and b"run.sh" not in paths and b"later.txt" not in paths
    assert b"sub" not in paths, "a nested repository's pointer is left to git add"
    assert parsed.dropped == 4


def test_a_conflicted_path_is_left_out(tmp_path: Path) -> None:
    root = repo_with_files(tmp_path / "repo")
    user_git(root, "checkout", "-q", "-b", "other")
    write(root, "a.txt", "other\n")
    user_git(root, "commit", "-q", "-am", "other")
    user_git(root, "checkout", "-q", "-")
    write(root, "a.txt", "mine\n")
    user_git(root, "commit", "-q", "-am", "mine")
    subprocess.run(["git", "merge", "-q", "other"], cwd=root, env=USER_GIT_ENV, check=False)
    parsed = parse_index(index_bytes(root))
    assert b"a.txt" not in [entry.path for entry in parsed.entries]
    assert parsed.dropped == 3


def entry(path: bytes) -> IndexEntry:
    return IndexEntry((0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0), bytes(20), path)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"DIRC",
        b"DIRC" + bytes(40),
        write_index((entry(b"a"),))[:-1] + b"\x00",
        write_index((entry(b"../escape"),)),
        write_index((entry(b"dir/.GIT/config"),)),
        write_index((entry(b"b"), entry(b"a"))),
        write_index((entry(b"a"), entry(b"a"))),
        write_index((entry(b"a"),))[:40] + write_index((entry(b"a"),))[-20:],
    ],
)
def test_damaged_or_unsafe_indexes_are_refused(data: bytes) -> None:
    with pytest.raises(IndexUnusable):
        parse_index(data)


def test_usable_paths() -> None:
    assert usable_path(b"a/b.txt")
    assert usable_path(b".github/workflows/ci.yml")
    for bad in (b"", b"/abs", b"a//b", b"a/./b", b"a/../b", b".git", b"x/.Git/y", b"dir/"):
        assert not usable_path(bad), bad


def test_a_written_index_round_trips() -> None:
    entries = tuple(entry(name) for name in (b"a", b"b/c", b"d" * 5000))
    assert parse_index(write_index(entries)).entries == entries
