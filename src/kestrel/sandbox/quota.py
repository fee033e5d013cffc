"""A disk quota for the workspace as a whole, kept while a command runs.

The kernel caps the size of one file (`RLIMIT_FSIZE`), not how much a command writes in all: ten
thousand small files, or many files each under the cap, fill the disk just the same. So the
folder that receives the command's writes (the overlay's upper layer where the session has one,
else the workspace) is measured before the command starts, then sampled while it runs; when it
has grown past the quota the command is stopped and the result says why.

Sizes are what the files occupy on disk (allocated blocks, like `du`), each hard-linked file
counted once, without crossing into other filesystems. A scan of a big tree costs time, so the
sampling slows down on its own: it never spends more than about a fifth of one core.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024
BUSY_SHARE = 0.2
"""The most of one core the sampling may use: after a scan of t seconds it rests 4t or more."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What a folder occupies on disk."""

    bytes: int
    files: int


def disk_usage(folder: Path) -> Usage:
    """Allocated bytes of everything under `folder` (not following links, nor leaving its
    filesystem), and how many entries it holds."""
    try:
        top = os.stat(folder, follow_symlinks=False)
    except OSError:
        return Usage(0, 0)
    seen: set[tuple[int, int]] = set()
    total, files = 0, 0
    stack = [os.fspath(folder)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue  # removed while we looked, or unreadable: it holds nothing we can count
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                files += 1
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode) and info.st_dev == top.st_dev:
                    stack.append(entry.path)
    return Usage(total, files)


class WorkspaceQuota:
    """Stops a command once `folders` together have grown by more than `limit_bytes` since
    `start` (the workspace, and the session's sandbox state where it keeps /tmp and packages)."""

    def __init__(self, folders: tuple[Path, ...], limit_bytes: int) -> None:
        self.folders = folders
        self.limit_bytes = limit_bytes
        self.baseline = 0
        self.last = 0
        """Growth seen at the last sample, in bytes."""
        self._rest_until = 0.0

    def start(self) -> None:
        """Measure the folders as they are before the command: only growth past this counts."""
        self.baseline = self._size()

    def check(self, *, force: bool = False) -> str | None:
        """Sample the folder (unless resting after a long scan, or `force`); the reason to stop
        the command once it is over quota."""
        now = time.monotonic()
        if now < self._rest_until and not force:
            return None
        self.last = self._size() - self.baseline
        spent = time.monotonic() - now
        self._rest_until = now + spent / BUSY_SHARE
        if self.last > self.limit_bytes:
            return self.reason()
        return None

    def _size(self) -> int:
        return sum(disk_usage(folder).bytes for folder in self.folders)

    def reason(self) -> str:
        """What the result says when the quota stopped a command."""
        return (
            f"workspace quota of {self.limit_bytes // MiB} MiB exceeded "
            f"(the workspace grew by {self.last // MiB} MiB; settings: sandbox_limits.disk_mib)"
        )
