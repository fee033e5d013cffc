"""Host-side git that never runs what a sandboxed command wrote.

Every git command Kestrel itself runs on the host goes through `run_git`: the repository's
layout and ownership are checked (`layout`), its configuration must not name a program to run
(`config`), and the call gets a scrubbed environment with the dangerous keys switched off.
"""

from kestrel.gitsafe.invoke import (
    GitRun,
    GitUnavailable,
    NotARepository,
    open_repository,
    run_git,
    safe_env,
)
from kestrel.gitsafe.layout import Repository, UnsafeRepository, find_repository, read_gitdir

__all__ = [
    "GitRun",
    "GitUnavailable",
    "NotARepository",
    "Repository",
    "UnsafeRepository",
    "find_repository",
    "open_repository",
    "read_gitdir",
    "run_git",
    "safe_env",
]
