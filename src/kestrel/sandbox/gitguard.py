"""What of a repository's git metadata a sandboxed command may not change.

Git files that the host's git reads and acts on (hooks, config, the `.git` file of a worktree or
a submodule, `.gitmodules`, `info/attributes`) run code on the host at Kestrel's or the user's
next git command. They are mounted read-only inside the sandbox.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


def git_mount_args(workspace: Path) -> list[str]:
    """bubblewrap arguments that keep the workspace repository's host-run git files read-only."""
    git = workspace / ".git"
    if not git.is_dir() or git.is_symlink():
        return []
    with contextlib.suppress(OSError):
        (git / "hooks").mkdir(exist_ok=True)
    # Binding .git onto itself makes it a mount point, which cannot be renamed away and replaced.
    args = ["--bind", str(git), str(git)]
    for name in ("hooks", "config"):
        if (git / name).exists():
            args += ["--ro-bind", str(git / name), str(git / name)]
    return args
