"""Where a work tree's git metadata lives, and whether Kestrel may trust it.

A `.git` file (`gitdir: ...`) or a `commondir` file tells git to read its configuration, hooks
and objects from somewhere else. Anything inside the work tree can be rewritten by a command
the agent ran, so Kestrel follows such a pointer only to the places git itself puts them: a
linked worktree's directory under the main repository's `.git/worktrees/`, or a submodule's
under the superproject's `.git/modules/`. Every directory involved must belong to the user
running Kestrel, as git's own `safe.directory` check requires.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.errors import KestrelError

_MAX_POINTER_BYTES = 4096


class UnsafeRepository(KestrelError):
    """The repository's git metadata points somewhere Kestrel will not let git read from."""


@dataclass(frozen=True, slots=True)
class Repository:
    """A validated repository: its work tree, its own git directory and the shared one."""

    work_tree: Path
    git_dir: Path
    common_dir: Path


def find_repository(start: Path) -> Repository | None:
    """The repository whose work tree holds `start`, validated; None outside any work tree.

    Raises `UnsafeRepository` when the repository is found but its layout or ownership fails.
    """
    here = Path(os.path.abspath(start))
    for folder in (here, *here.parents):
        entry = folder / ".git"
        if os.path.lexists(entry):
            return check_repository(folder)
    return None


def check_repository(work_tree: Path) -> Repository:
    """Validate the repository whose `.git` entry is directly in `work_tree`."""
    work_tree = Path(os.path.realpath(work_tree))
    entry = work_tree / ".git"
    info = _lstat(entry)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeRepository(f"{entry} is a symbolic link; Kestrel does not follow it")
    _owned(work_tree)
    _owned(entry)
    if stat.S_ISDIR(info.st_mode):
        if os.path.lexists(entry / "commondir"):
            raise UnsafeRepository(
                f"{entry / 'commondir'} points this repository's configuration elsewhere; "
                "only a linked worktree's git directory may have one"
            )
        repo = Repository(work_tree, entry, entry)
    elif stat.S_ISREG(info.st_mode):
        repo = _linked(work_tree, entry)
    else:
        raise UnsafeRepository(f"{entry} is neither a directory nor a file")
    check_alternates(repo)
    return repo


def _linked(work_tree: Path, entry: Path) -> Repository:
    """A `.git` file: a linked worktree or a submodule, and only in git's own layout."""
    git_dir = read_gitdir(entry)
    if not git_dir.is_dir():
        raise UnsafeRepository(f"{entry} points at {git_dir}, which is not a directory")
    _outside(git_dir, work_tree, entry)
    _owned(git_dir)
    if git_dir.parent.name == "worktrees":
        common = git_dir.parent.parent
        _main_git_dir(common, entry)
        _same(_pointer(git_dir / "commondir", git_dir), common, git_dir / "commondir")
        _same(_pointer(git_dir / "gitdir", git_dir), entry, git_dir / "gitdir")
    else:
        _superproject_modules(git_dir, work_tree, entry)
        if os.path.lexists(git_dir / "commondir"):
            raise UnsafeRepository(f"{git_dir / 'commondir'} is not allowed in a submodule")
        common = git_dir
    _owned(common)
    _outside(common, work_tree, entry)
    return Repository(work_tree, git_dir, common)


def _main_git_dir(common: Path, entry: Path) -> None:
    """A worktree's shared directory: a work tree's own `.git`, or a bare repository that
    lies in no work tree (where a command could have made it up)."""
    if common.name == ".git" and _is_git_dir(common):
        return
    if _is_git_dir(common) and not any(os.path.lexists(p / ".git") for p in common.parents):
        return
    raise UnsafeRepository(
        f"{entry} points at a worktree of {common}, which is not a repository's own git directory"
    )


def _superproject_modules(git_dir: Path, work_tree: Path, entry: Path) -> None:
    """`git_dir` must lie under `modules/` of the git directory of the enclosing repository."""
    outer = find_repository(work_tree.parent)
    if outer is not None and git_dir.is_relative_to(outer.git_dir / "modules"):
        return
    raise UnsafeRepository(
        f"{entry} points at {git_dir}, which is neither a linked worktree's directory "
        "(under .git/worktrees/) nor a submodule's (under its superproject's .git/modules/)"
    )


def read_gitdir(entry: Path) -> Path:
    """The directory a `.git` file names, resolved against the file's own folder."""
    text = _read_small(entry)
    first = text.split("\n", 1)[0].rstrip("\r")
    if not first.startswith("gitdir: "):
        raise UnsafeRepository(f"{entry} is not a `gitdir:` file")
    return Path(os.path.realpath(entry.parent / first[len("gitdir: ") :]))


def check_alternates(repo: Repository) -> None:
    """Refuse object stores borrowed from inside the work tree or from another user."""
    objects = repo.common_dir / "objects"
    listing = objects / "info" / "alternates"
    if not os.path.lexists(listing):
        return
    _owned(listing)
    for line in _read_small(listing, limit=65536).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            raise UnsafeRepository(f"{listing} names a quoted path, which Kestrel does not read")
        borrowed = Path(os.path.realpath(objects / line))
        if not borrowed.is_dir():
            raise UnsafeRepository(f"{listing} names {borrowed}, which is not a directory")
        _owned(borrowed)
        if borrowed.is_relative_to(repo.work_tree) and not borrowed.is_relative_to(
            repo.work_tree / ".git"
        ):
            raise UnsafeRepository(f"{listing} borrows objects from inside the work tree")


def _pointer(path: Path, base: Path) -> Path:
    text = _read_small(path).split("\n", 1)[0].rstrip("\r")
    if not text:
        raise UnsafeRepository(f"{path} is empty")
    return Path(os.path.realpath(base / text))


def _same(found: Path, expected: Path, where: Path) -> None:
    if found != Path(os.path.realpath(expected)):
        raise UnsafeRepository(f"{where} points at {found}, not at {expected}")


def _outside(path: Path, work_tree: Path, entry: Path) -> None:
    if path.is_relative_to(work_tree):
        raise UnsafeRepository(
            f"{entry} points at {path}, inside the work tree, where any command could change it"
        )


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _lstat(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as error:
        raise UnsafeRepository(f"cannot read {path}: {error.strerror}") from error


def _owned(path: Path) -> None:
    """Git's ownership rule: the path must belong to the user (or to sudo's caller, as root)."""
    owner = _lstat(path).st_uid
    allowed = {os.geteuid()}
    sudo = os.environ.get("SUDO_UID", "")
    if os.geteuid() == 0 and sudo.isdigit():
        allowed.add(int(sudo))
    if owner not in allowed:
        raise UnsafeRepository(f"{path} belongs to user {owner}, not to the user running Kestrel")


def _read_small(path: Path, limit: int = _MAX_POINTER_BYTES) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise UnsafeRepository(f"cannot read {path}: {error.strerror}") from error
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UnsafeRepository(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeRepository(f"{path} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")
