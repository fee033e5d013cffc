"""What a sandboxed command needs beyond the bare view to do ordinary work.

Package installs that land in a per-session writable place instead of the read-only interpreter,
and git alternates outside the workspace that a checkout's object store points at.
"""

from __future__ import annotations

from pathlib import Path


def usability_mount_args(workspace: Path) -> list[str]:
    """Extra bubblewrap arguments for `workspace`: alternates and package targets."""
    del workspace
    return []


def usability_environment(workspace: Path) -> dict[str, str]:
    """Extra environment variables a command in `workspace` gets."""
    del workspace
    return {}
