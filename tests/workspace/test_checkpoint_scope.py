"""Python virtual environments in the top two levels of a workspace are left out of checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkpoint_kit import user_git, write

from kestrel.workspace import CheckpointStore
from kestrel.workspace.checkpoint_scope import virtual_environments

pytestmark = pytest.mark.system


def make_venv(folder: Path) -> None:
    write(folder, "pyvenv.cfg", "home = /usr/bin\n")
    write(folder, "lib/python3.11/site-packages/pkg/__init__.py", "VERSION = 1\n")
    write(folder, "bin/python", "#!/bin/sh\n").chmod(0o755)


def test_virtualenvs_are_found_two_levels_down_and_no_deeper(tmp_path: Path) -> None:
    make_venv(tmp_path / ".venv")
    make_venv(tmp_path / "backend" / "env")
    make_venv(tmp_path / "a" / "b" / "too-deep")
    write(tmp_path, "venv/not-a-venv.txt", "no pyvenv.cfg here\n")
    (tmp_path / "linked").symlink_to(tmp_path / ".venv")
    assert virtual_environments(tmp_path) == [".venv", "backend/env"]


def test_a_virtualenv_is_neither_recorded_nor_restored(tmp_path: Path) -> None:
    root = tmp_path / "project"
    write(root, "app.py", "print('app')\n")
    user_git(root, "init", "-q")
    user_git(root, "add", "--all")
    user_git(root, "commit", "-q", "-m", "initial")
    store = CheckpointStore(root, tmp_path / "shadow")
    first = store.snapshot("first")
    assert first is not None
    make_venv(root / ".venv")
    make_venv(root / "a" / "b" / "deep")
    write(root, "new.py", "x = 1\n")
    second = store.snapshot("after creating a virtualenv")
    assert second is not None
    assert {change.path for change in second.changes} == {
        "new.py",
        "a/b/deep/pyvenv.cfg",
        "a/b/deep/lib/python3.11/site-packages/pkg/__init__.py",
        "a/b/deep/bin/python",
    }
    store.restore(first.id)
    assert not (root / "new.py").exists()
    assert (root / ".venv" / "pyvenv.cfg").is_file(), "left alone, as an ignored folder"
    assert not (root / "a").exists()
