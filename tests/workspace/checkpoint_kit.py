"""Helpers for the checkpoint tests: the user's repository via real git, and tree fingerprints."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

# What a user's own git sees; its config is isolated so the machine's settings do not leak in.
USER_GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
}


def user_git(root: Path, *args: str) -> str:
    """Run the user's git in `root` and return its stdout."""
    done = subprocess.run(
        ["git", *args], cwd=root, env=USER_GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout


def write(root: Path, relative: str, content: str | bytes) -> Path:
    """Create or replace a file, making its folders."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


FileState = tuple[str, int, bytes]


def tree_state(root: Path, ignored: tuple[str, ...] = ()) -> dict[str, FileState]:
    """Every file and symlink under `root` but `.git` and `ignored` prefixes: kind, mode, bytes."""
    state: dict[str, FileState] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if name != ".git"]
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if relative.startswith(ignored):
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                state[relative] = ("link", 0, os.readlink(path).encode())
            else:
                state[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return state


def fingerprint(path: Path) -> str:
    """A hash of every file's name, mode, mtime and bytes under `path` (for "untouched" checks)."""
    digest = hashlib.sha256()
    for folder, _dirs, files in sorted(os.walk(path)):
        for name in sorted(files):
            file = Path(folder, name)
            info = file.lstat()
            digest.update(f"{file}\0{info.st_mode}\0{info.st_mtime_ns}\0".encode())
            if not stat.S_ISLNK(info.st_mode):
                digest.update(file.read_bytes())
    return digest.hexdigest()
