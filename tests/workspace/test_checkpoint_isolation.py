"""The user's configuration, environment and project attributes cannot change what is recorded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_kit import fingerprint, tree_state, user_git, write

from kestrel.workspace import CheckpointStore

pytestmark = pytest.mark.system

HOSTILE_CONFIG = """\
[core]
    autocrlf = true
    hooksPath = {hooks}
    excludesFile = {home}/global-ignore
    fsmonitor = {hooks}/fsmonitor
[commit]
    gpgSign = true
[gpg]
    program = /bin/false
[user]
    signingKey = nobody
[diff]
    external = /bin/false
    noprefix = true
[gc]
    auto = 1
"""


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """Modes written by git depend on the umask; pin the usual one for exact comparisons."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def hostile_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME and XDG config whose git settings would sign, convert, hook and ignore."""
    home = tmp_path / "home"
    hooks = home / "hooks"
    for name in (
        "pre-commit",
        "post-commit",
        "fsmonitor",
        "post-checkout",
        "reference-transaction",
    ):
        hook = write(hooks, name, f"#!/bin/sh\ntouch {home}/hook-ran\nexit 1\n")
        hook.chmod(0o755)
    config = HOSTILE_CONFIG.format(hooks=hooks, home=home)
    write(home, ".gitconfig", config)
    write(home, ".config/git/config", config)
    write(home, "global-ignore", "*.txt\n")
    write(home, ".config/git/attributes", "* text eol=crlf\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


def test_global_config_does_not_interfere(tmp_path: Path, hostile_home: Path) -> None:
    root = tmp_path / "project"
    write(root, "notes.txt", "line one\nline two\n")
    write(root, "tool.sh", "#!/bin/sh\n")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    assert first is not None
    assert {change.path for change in first.changes} == {"notes.txt", "tool.sh"}
    expected = tree_state(root)
    write(root, "notes.txt", "changed\n")
    (root / "tool.sh").chmod(0o755)
    assert store.snapshot("second") is not None
    assert "--- a/notes.txt" in store.diff(first.id)
    store.restore(first.id)
    assert tree_state(root) == expected
    assert not (hostile_home / "hook-ran").exists()


def test_git_variables_in_the_environment_do_not_reach_the_users_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    write(root, "a.txt", "a\n")
    user_git(root, "init", "-q")
    user_git(root, "add", "a.txt")
    user_git(root, "commit", "-q", "-m", "initial")
    before = fingerprint(root / ".git")
    # As if called from inside one of the user's git hooks.
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(root / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    write(root, "b.txt", "b\n")
    assert store.snapshot("second") is not None
    assert first is not None
    store.restore(first.id)
    assert fingerprint(root / ".git") == before
    assert not (root / "b.txt").exists()


def test_project_attributes_cannot_change_the_bytes(tmp_path: Path) -> None:
    root = tmp_path / "project"
    write(root, ".gitattributes", "* text eol=crlf\n*.dat filter=lfs\n")
    write(root, "unix.txt", b"one\ntwo\n")
    write(root, "dos.txt", b"one\r\ntwo\r\n")
    write(root, "mixed.dat", b"a\nb\r\nc\x00")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    expected = tree_state(root)
    for name in ("unix.txt", "dos.txt", "mixed.dat"):
        write(root, name, "replaced\n")
    assert store.snapshot("second") is not None
    assert first is not None
    store.restore(first.id)
    assert tree_state(root) == expected


def test_a_nested_repository_without_commits_does_not_stop_checkpoints(tmp_path: Path) -> None:
    root = tmp_path / "project"
    write(root, "a.txt", "a\n")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    write(root, "fresh crate/src/main.rs", "fn main() {}\n")
    user_git(root / "fresh crate", "init", "-q")
    write(root, "b.txt", "b\n")
    second = store.snapshot("after git init")
    assert second is not None
    assert [change.path for change in second.changes] == ["b.txt"]
    assert first is not None
    store.restore(first.id)
    assert not (root / "b.txt").exists()
    assert (root / "fresh crate" / "src" / "main.rs").read_text() == "fn main() {}\n"
