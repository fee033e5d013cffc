"""A checkpoint's index brought up to date from a kernel overlay's upper layer (see `upper_scan`).

Three git processes whatever the size of the checkout: `check-ignore` leaves out the new files
the project ignores, `update-index` records every path the layer names (adding, replacing or
removing its entry), and `write-tree`. It is used only while the worktree is the merged view of
that very overlay, and only after a full walk in this process; anything unexpected falls back to
the full walk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kestrel.workspace.shadow_git import ShadowGit
from kestrel.workspace.upper_scan import scan_upper


@dataclass(frozen=True, slots=True)
class OverlayLayers:
    """The layers of the kernel overlay mounted over a session's worktree."""

    upper: Path
    lower: Path
    """The checkout itself, as the overlay sees it below the session's writes."""


def index_from_upper(
    git: ShadowGit, worktree: Path, layers: OverlayLayers, seen: frozenset[str]
) -> tuple[frozenset[str], str] | None:
    """Update the index from the paths the upper layer names and those `seen` at the previous
    checkpoint; the files present now and the tree id. None (nothing changed) when the overlay
    is not mounted there or the layer needs a full walk."""
    if not mounted(worktree, layers.upper):
        return None
    scan = scan_upper(layers.upper, layers.lower)
    if scan is None:
        return None
    kinds = {p: _kind(worktree / p) for p in sorted(scan.candidates | seen)}
    ignored = _ignored(git, [p for p, kind in kinds.items() if kind == "file"])
    if ignored is None:
        return None
    # A path that is a folder now loses its own entry (a file it was); its files are added below.
    folders = [p for p, kind in kinds.items() if kind == "directory"]
    wanted = [p for p, kind in kinds.items() if kind != "directory" and p not in ignored]
    for flags, listed in (
        (("--force-remove",), folders),
        (("--add", "--remove", "--replace"), wanted),
    ):
        if not listed:
            continue
        listing = b"".join(os.fsencode(p) + b"\0" for p in listed)
        if git.run("update-index", "-z", *flags, "--stdin", stdin=listing, check=False).returncode:
            return None
    return scan.present, git.text("write-tree")


def present_in_upper(worktree: Path, layers: OverlayLayers) -> frozenset[str] | None:
    """The files the upper layer holds now, when the next checkpoint may start from them."""
    if not mounted(worktree, layers.upper):
        return None
    scan = scan_upper(layers.upper, layers.lower)
    return None if scan is None else scan.present


def mounted(worktree: Path, upper: Path) -> bool:
    """Whether the newest mount at `worktree` (in this process's view) is the overlay whose
    upper layer is `upper`."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    point = _escape(str(worktree))
    found = False
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 5 or fields[4] != point:
            continue
        tail = line.split(" - ", 1)[1].split(" ") if " - " in line else []
        options = tail[2].split(",") if len(tail) > 2 else []
        found = bool(tail) and tail[0] == "overlay" and f"upperdir={_escape(str(upper))}" in options
    return found


def _escape(path: str) -> str:
    """A path as mountinfo writes it: space, tab, newline and backslash in octal."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


def _kind(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "missing"
    return "directory" if (mode & 0o170000) == 0o040000 else "file"


def _ignored(git: ShadowGit, paths: list[str]) -> set[str] | None:
    """Which of `paths` (untracked ones only) the project's ignore rules leave out."""
    if not paths:
        return set()
    listing = b"".join(os.fsencode(p) + b"\0" for p in paths)
    done = git.run("check-ignore", "-z", "--stdin", stdin=listing, check=False)
    if done.returncode not in (0, 1):
        return None
    return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}
