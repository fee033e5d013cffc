"""A checkout's own config, hooks and index extensions run nothing when its index seeds a store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_kit import fingerprint, tree_state, user_git, write

from kestrel.workspace import CheckpointStore
from kestrel.workspace.git_index import parse_index

pytestmark = pytest.mark.system

HOOKS = (
    "pre-commit",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
)


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """Modes written by git depend on the umask; pin the usual one for exact comparisons."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def marker_script(folder: Path, name: str, marker: Path, output: str = "") -> Path:
    """An executable that creates `marker` (and prints `output`) whenever something runs it."""
    script = write(folder, name, f"#!/bin/sh\ntouch '{marker}'\nprintf '{output}'\n")
    script.chmod(0o755)
    return script


def hostile_checkout(root: Path, marker: Path) -> Path:
    """A checkout whose config names an fsmonitor, a filter and hooks that each leave `marker`,
    and whose version-4 index carries untracked-cache and fsmonitor extensions."""
    write(root, ".gitattributes", "* filter=evil\n")
    write(root, "a.txt", "one\n")
    write(root, "lib/b.py", "two = 2\n")
    user_git(root, "init", "-q")
    user_git(root, "add", "--all")
    user_git(root, "commit", "-q", "-m", "initial")
    tools = root.parent / "tools"
    monitor = marker_script(tools, "fsmonitor", root.parent / "monitor-ran", "token\\0/\\0")
    # Build the extensions with the checkout's own git first (that does run its monitor).
    user_git(root, "update-index", "--index-version", "4")
    user_git(root, "-c", "core.untrackedCache=true", "-c", f"core.fsmonitor={monitor}", "status")
    extensions = (root / ".git" / "index").read_bytes()
    assert b"UNTR" in extensions and b"FSMN" in extensions
    filter_ = marker_script(tools, "filter", marker)
    with (root / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            f"[core]\n\tfsmonitor = {marker_script(tools, 'monitor2', marker)}\n"
            f"\tuntrackedCache = true\n\thooksPath = {root / '.git' / 'hooks'}\n"
            f'[filter "evil"]\n\tclean = {filter_}\n\tsmudge = {filter_}\n'
            f"\tprocess = {filter_}\n\trequired = true\n"
            "[index]\n\tversion = 4\n"
        )
    for hook in HOOKS:
        marker_script(root / ".git" / "hooks", hook, marker)
    return root


def test_nothing_of_the_checkout_runs_while_seeding_recording_and_restoring(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "hostile-ran"
    root = hostile_checkout(tmp_path / "project", marker)
    index_before = (root / ".git" / "index").read_bytes()
    git_before = fingerprint(root / ".git")
    write(root, "a.txt", "changed\n")
    write(root, "new.txt", "new\n")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    assert first is not None
    assert sorted((tmp_path / "shadow" / "objects" / "pack").glob("*.pack")), "it was seeded"
    expected = tree_state(root)
    write(root, "lib/b.py", "three = 3\n")
    (root / "a.txt").unlink()
    assert store.snapshot("second") is not None
    store.restore(first.id)
    assert tree_state(root) == expected
    assert not marker.exists()
    assert (root / ".git" / "index").read_bytes() == index_before
    assert fingerprint(root / ".git") == git_before


def test_the_seeded_index_keeps_no_extension_of_the_checkouts(tmp_path: Path) -> None:
    marker = tmp_path / "hostile-ran"
    root = hostile_checkout(tmp_path / "project", marker)
    parsed = parse_index((root / ".git" / "index").read_bytes())
    assert [entry.path for entry in parsed.entries] == [b".gitattributes", b"a.txt", b"lib/b.py"]
    store = CheckpointStore(root, tmp_path / "shadow", session="s")
    assert store.snapshot("first") is not None
    assert not marker.exists()
    # The private index holds what the shadow's own git wrote: no fsmonitor data.
    private = (tmp_path / "shadow" / "kestrel-index" / "s").read_bytes()
    assert b"FSMN" not in private
    assert parse_index(private).entries[0].path == b".gitattributes"
