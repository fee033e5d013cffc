"""What check detection may read of a project, behind a small interface, with a disk and a
memory implementation."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

MAX_FILES = 20_000
MAX_READ_BYTES = 512_000
# Never the project's own sources: version control, environments, dependencies, build output.
SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "venv", "site-packages", "target", "build", "dist"}
)


class ProjectFiles(Protocol):
    """Read-only access to a project's files by root-relative POSIX path."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when it is missing, unreadable or too large."""
        ...

    def is_file(self, path: str) -> bool:
        """Whether `path` exists as a file (hidden and vendored folders included)."""
        ...

    def files(self) -> Sequence[str]:
        """The project's files, sorted, without hidden, vendored or build folders."""
        ...


class DiskFiles:
    """`ProjectFiles` over a directory on disk; the file listing is walked once, on first use."""

    def __init__(self, root: Path, *, max_files: int = MAX_FILES) -> None:
        self._root = root
        self._max_files = max_files
        self._files: tuple[str, ...] | None = None

    def read_text(self, path: str) -> str | None:
        """The file's text (undecodable bytes replaced), or None."""
        target = self._root / path
        try:
            if not target.is_file() or target.stat().st_size > MAX_READ_BYTES:
                return None
            return target.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def is_file(self, path: str) -> bool:
        """Whether `path` is a file under the root."""
        return (self._root / path).is_file()

    def files(self) -> Sequence[str]:
        """Up to `max_files` project files, walked in sorted order."""
        if self._files is None:
            self._files = tuple(self._walk())
        return self._files

    def _walk(self) -> list[str]:
        found: list[str] = []
        for folder, dirs, names in os.walk(self._root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
            relative = os.path.relpath(folder, self._root)
            prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
            for name in sorted(names):
                found.append(prefix + name)
                if len(found) >= self._max_files:
                    return found
        return found


class MemoryFiles:
    """`ProjectFiles` over a mapping of path to text: a double for tests of detection."""

    def __init__(self, contents: Mapping[str, str]) -> None:
        self._contents = dict(contents)

    def read_text(self, path: str) -> str | None:
        """The text stored for `path`, or None."""
        return self._contents.get(path)

    def is_file(self, path: str) -> bool:
        """Whether a text is stored for `path`."""
        return path in self._contents

    def files(self) -> Sequence[str]:
        """The stored paths outside hidden and vendored folders, sorted."""
        return sorted(path for path in self._contents if _listed(path))


def _listed(path: str) -> bool:
    folders = path.split("/")[:-1]
    return not any(part.startswith(".") or part in SKIPPED_DIRS for part in folders)
