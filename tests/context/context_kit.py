"""Small real repositories for the context engine's tests: files written, bumped and committed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def bump(path: Path) -> None:
    """Make sure a rewrite is visible in the stat even on coarse-grained clocks."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def write(root: Path, files: dict[str, str], *, bumped: bool = False) -> None:
    """Write `files` (path → text) under `root`; `bumped`: each one's stat shows the rewrite."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        if bumped:
            bump(target)


def committed_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository at `root` holding `files` in one commit."""
    root.mkdir()
    write(root, files)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root


def modules_repo(root: Path, count: int, text_of: Callable[[int], str]) -> Path:
    """A git repository of `count` modules `app/mod_NN.py` with `text_of(N)` in each."""
    write(root, {f"app/mod_{i:02}.py": text_of(i) for i in range(count)})
    git(root, "init", "-q")
    return root
