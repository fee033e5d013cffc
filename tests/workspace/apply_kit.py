"""Helpers for the apply tests: trees written from dicts, snapshots, and change sets by diff."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from kestrel.workspace.changes import Change, ChangeSet, Entry

Files = dict[str, Entry]
Snapshot = dict[str, tuple[object, ...]]


class Crash(Exception):
    """Raised from a fault hook to stand for the process dying at that step."""


def text(content: str, *, executable: bool = False) -> Entry:
    """A text file entry."""
    return Entry("file", content.encode(), executable)


def link(target: str) -> Entry:
    """A symlink entry."""
    return Entry("symlink", target.encode())


def crash_at(step: str) -> Callable[[str], None]:
    """A fault hook that raises `Crash` at `step`."""

    def fault(name: str) -> None:
        if name == step:
            raise Crash(name)

    return fault


def materialize(root: Path, files: Files) -> Path:
    """Write `files` under `root` with exact modes (0o644, or 0o755 when executable)."""
    for path, entry in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "symlink":
            os.symlink(os.fsdecode(entry.data), target)
        else:
            target.write_bytes(entry.data)
            target.chmod(0o755 if entry.executable else 0o644)
    return root


def snapshot(root: Path) -> Snapshot:
    """Every folder, file (mode and bytes) and symlink (target) under `root`."""
    state: Snapshot = {}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                state[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                state[relative] = ("dir",)
            else:
                state[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return state


def leftovers(root: Path) -> list[str]:
    """Names of staged temporary files anywhere under `root`."""
    return [
        name for _, dirs, files in os.walk(root) for name in (*dirs, *files) if ".kestrel-" in name
    ]


def changes_between(
    before: Files, after: Files, renames: dict[str, str] | None = None
) -> ChangeSet:
    """The change set that turns `before` into `after`; `renames` maps new path to old path."""
    renames = renames or {}
    changes = [
        Change(path, before.get(path), after.get(path), renames.get(path))
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
    ]
    return ChangeSet(tuple(changes))


# A change with every kind of op: modify, rename, mode change, link change, a file that becomes a
# folder, a folder that becomes a file, new folders, deletions that empty a folder.
BEFORE: Files = {
    "README.md": text("hello\n"),
    "src/app.py": text("print(1)\n"),
    "src/old_name.py": text("x = 1\n"),
    "scripts/run.sh": text("echo hi\n"),
    "docs/guide.md": text("guide\n"),
    "link": link("README.md"),
    "bin": text("a file that becomes a folder\n"),
    "conf/a.ini": text("a\n"),
    "conf/sub/b.ini": text("b\n"),
}
AFTER: Files = {
    "README.md": text("hello\nworld\n"),
    "src/app.py": text("print(1)\n"),
    "src/new_name.py": text("x = 1\n"),
    "scripts/run.sh": text("echo hi\n", executable=True),
    "link": link("src/app.py"),
    "bin/tool": text("#!/bin/sh\n", executable=True),
    "conf": text("a folder that became a file\n"),
    "pkg/deep/mod.py": text("y = 2\n"),
    "pointer": link("pkg/deep/mod.py"),
}
RENAMES = {"src/new_name.py": "src/old_name.py"}


def scenario_changes() -> ChangeSet:
    """The change set of the shared scenario."""
    return changes_between(BEFORE, AFTER, RENAMES)
