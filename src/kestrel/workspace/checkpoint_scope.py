"""Folders a checkpoint leaves out although no ignore file names them: Python virtualenvs.

A virtual environment inside a checkout holds tens of thousands of files that the project's own
`.gitignore` often does not name (it is left to each developer's global ignore file, which
checkpoints do not read). Recording one made a first checkpoint hash hundreds of megabytes and
every later one walk it again, so folders that hold a `pyvenv.cfg` at their top, at the top of
the worktree or one level below, are treated as ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

from kestrel.workspace.shadow_git import exclude_pattern

_MARKER = "pyvenv.cfg"
_DEPTH = 2


def virtual_environments(worktree: Path) -> list[str]:
    """Relative paths (with `/`) of the virtualenv folders in the worktree's top two levels."""
    found: list[str] = []
    _scan(worktree, "", _DEPTH, found)
    return sorted(found)


def exclude_virtual_environments(worktree: Path, exclude_file: Path) -> None:
    """Add a line for each virtualenv of the worktree that `exclude_file` does not name yet.

    An ignore line (rather than a pathspec) keeps git from walking the folder at all, and a
    file that was recorded before keeps being recorded, as with any ignore rule.
    """
    found = virtual_environments(worktree)
    if not found:
        return
    try:
        known = set(exclude_file.read_text(encoding="utf-8", errors="replace").splitlines())
    except FileNotFoundError:
        known = set()
    lines = [line for line in map(exclude_pattern, found) if line not in known]
    if lines:
        with exclude_file.open("a", encoding="utf-8", errors="surrogateescape") as file:
            file.writelines(line + "\n" for line in lines)


def _scan(folder: Path, prefix: str, depth: int, found: list[str]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name == ".git":
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        relative = prefix + entry.name
        if os.path.isfile(os.path.join(entry.path, _MARKER)):
            found.append(relative)
        elif depth > 1:
            _scan(Path(entry.path), relative + "/", depth - 1, found)
