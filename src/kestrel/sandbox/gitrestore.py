"""Put back the git files a sandboxed command changed, and say so.

Read-only binds cover the guarded git files that exist. Those that do not exist cannot be bound
without creating them on the host, and a command may rename a folder that holds one; so the
guarded paths are recorded before each command and compared after it. Whatever differs is moved
aside as `<name>.kestrel-blocked` (nothing is deleted), the recorded state is put back, and
the command's output says which paths were put back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from kestrel.sandbox.base import ExecResult, OutputSink
from kestrel.sandbox.gitguard import prepare_git_dir, protected_paths

_MAX_FILE = 1 << 20
_MAX_ENTRIES = 512
BLOCKED_SUFFIX = ".kestrel-blocked"
"""Appended to the name of whatever a command put where a guarded git file belongs."""


@dataclass(frozen=True, slots=True)
class _File:
    data: bytes
    mode: int


@dataclass(frozen=True, slots=True)
class _Link:
    target: str


@dataclass(frozen=True, slots=True)
class _Dir:
    entries: tuple[tuple[str, _Node], ...]


@dataclass(frozen=True, slots=True)
class _Opaque:
    """Too big to keep a copy of: compared by size and time, moved aside but not rebuilt."""

    size: int
    mtime_ns: int


_Node = _File | _Link | _Dir | _Opaque | None


class GitFiles:
    """The guarded git files of a workspace as they were before a command."""

    def __init__(self, root: Path, before: dict[Path, _Node]) -> None:
        self.root = root
        self._before = before
        self._settled = False

    @classmethod
    def take(cls, workspace: Path) -> GitFiles:
        """Record every guarded path of `workspace` (absent ones as absent)."""
        root = Path(os.path.realpath(workspace))
        prepare_git_dir(root)
        return cls(root, {path: _capture(path) for path in protected_paths(root)})

    def restore(self) -> list[str]:
        """Put back each guarded path that differs from the record; the paths put back.

        Paths that became guarded during the command (a new submodule's `.git` file, a new
        module directory's config) count as absent before it.
        """
        self._settled = True
        put_back = self._put_back(list(self._before))
        # Listed only once the recorded files are back, so that a planted `commondir` cannot
        # hide the gitlinks added beside it.
        new = [path for path in protected_paths(self.root) if path not in self._before]
        return put_back + self._put_back(new)

    def settle(self) -> None:
        """Restore unless done already: for a command that was cancelled or failed to run."""
        if not self._settled:
            self.restore()

    def _put_back(self, paths: list[Path]) -> list[str]:
        done: list[str] = []
        for path in paths:
            was = self._before.get(path)
            if _capture(path) == was:
                continue
            rel = path.relative_to(self.root)
            _put(self.root, rel.parts, was)
            done.append(rel.as_posix())
        return done

    @classmethod
    async def record(cls, workspace: Path) -> GitFiles:
        """`take`, off the event loop (it runs git)."""
        return await asyncio.to_thread(cls.take, workspace)

    async def check(self, result: ExecResult, on_output: OutputSink | None) -> ExecResult:
        """`report`, with the restore off the event loop."""
        return self._noted(result, await asyncio.to_thread(self.restore), on_output)

    def report(self, result: ExecResult, on_output: OutputSink | None) -> ExecResult:
        """Restore, and add a note naming what was put back to `result`'s output."""
        return self._noted(result, self.restore(), on_output)

    def _noted(
        self, result: ExecResult, put_back: list[str], on_output: OutputSink | None
    ) -> ExecResult:
        if not put_back:
            return result
        note = (
            "\n[kestrel] The command changed git files that git on the host acts on; they were "
            f"put back, and what it wrote is kept beside them as *{BLOCKED_SUFFIX}: "
            f"{', '.join(put_back)}.\n"
        )
        if on_output is not None:
            on_output("stderr", note)
        return replace(result, output=result.output + note)


def _capture(path: Path, budget: list[int] | None = None) -> _Node:
    budget = budget if budget is not None else [_MAX_ENTRIES]
    try:
        info = os.lstat(path)
    except OSError:
        return None
    budget[0] -= 1
    if stat.S_ISLNK(info.st_mode):
        return _Link(os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        if budget[0] < 0:
            return _Opaque(0, info.st_mtime_ns)
        with contextlib.suppress(OSError):
            names = sorted(os.listdir(path))
            return _Dir(tuple((name, _capture(path / name, budget)) for name in names))
        return _Opaque(0, info.st_mtime_ns)
    if stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_FILE and budget[0] >= 0:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                return _File(handle.read(_MAX_FILE + 1), stat.S_IMODE(info.st_mode))
    return _Opaque(info.st_size, info.st_mtime_ns)


def _put(root: Path, parts: tuple[str, ...], node: _Node) -> None:
    """Move aside what is at `root/parts` and put `node` there, never through a symlink."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            fd = _enter(fd, part)
        name = parts[-1]
        if _exists(fd, name):
            _move_aside(fd, name)
        _write(fd, name, node)
    finally:
        os.close(fd)


def _enter(fd: int, name: str) -> int:
    """Open the folder `name` in `fd` (closing `fd`), making it where something else stands."""
    try:
        try:
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except (NotADirectoryError, OSError):
            _move_aside(fd, name)
            os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)
    return child


def _write(fd: int, name: str, node: _Node) -> None:
    if node is None or isinstance(node, _Opaque):
        return
    if isinstance(node, _Link):
        os.symlink(node.target, name, dir_fd=fd)
    elif isinstance(node, _File):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(name, flags, node.mode, dir_fd=fd)
        with os.fdopen(out, "wb") as handle:
            handle.write(node.data)
    else:
        os.mkdir(name, 0o755, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        try:
            for entry, inner in node.entries:
                _write(child, entry, inner)
        finally:
            os.close(child)


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _move_aside(fd: int, name: str) -> None:
    aside = name + BLOCKED_SUFFIX
    number = 1
    while _exists(fd, aside):
        number += 1
        aside = f"{name}{BLOCKED_SUFFIX}.{number}"
    os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
