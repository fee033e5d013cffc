"""Which paths a checkpoint must look at in a kernel overlay: those the upper layer names.

In a kernel overlay every write of the session lands in the upper layer: a changed or new file is
there whole, a deleted one leaves a whiteout (a 0/0 character device), and a directory deleted
and made again is marked opaque. So instead of walking the whole checkout (`git add --all`, about
100 ms on 7,000 files), a later checkpoint only has to look at the paths the upper layer names,
plus the files under deleted or opaque directories that the lower layer held, plus the paths the
previous look found (a file the session made and then deleted leaves no trace in the layer).

A scan returns None when the layer holds something only a full walk handles (a nested git
repository, or a path git cannot record), and the caller walks the checkout instead.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

_OPAQUE = "user.overlay.opaque"
"""The mark of an opaque directory in an overlay mounted with `userxattr`, as Kestrel's are."""


@dataclass(frozen=True, slots=True)
class UpperScan:
    """What the upper layer names, as paths relative to the checkout (`/`-separated)."""

    present: frozenset[str]
    """Regular files and symbolic links the session wrote."""
    candidates: frozenset[str]
    """Every path whose index entry may need updating: `present`, whiteouts and the lower
    layer's files under deleted or opaque directories."""


def scan_upper(upper: Path, lower: Path) -> UpperScan | None:
    """The paths `upper` names; None when the layer holds a nested repository or a name git
    cannot record. `lower` is the checkout as it was under the overlay."""
    present: set[str] = set()
    candidates: set[str] = set()
    for folder, dirs, files in os.walk(upper):
        relative = os.path.relpath(folder, upper)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        if ".git" in dirs or ".git" in files:
            return None
        if prefix and _opaque(Path(folder)):
            candidates.update(_lower_files(lower, prefix))
        for name in files:
            path = prefix + name
            if "\n" in path or "\\" in path:
                return None
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if stat.S_ISCHR(mode):
                candidates.add(path)  # A whiteout: gone, a file or a whole directory.
                candidates.update(_lower_files(lower, path + "/"))
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                present.add(path)
        for name in dirs:
            if os.path.islink(os.path.join(folder, name)):
                present.add(prefix + name)  # A link to a directory: record it as a link.
            elif _lower_is_file(lower, prefix + name):
                candidates.add(prefix + name)  # A folder now hides the checkout's file.
    candidates.update(present)
    return UpperScan(present=frozenset(present), candidates=frozenset(candidates))


def _lower_is_file(lower: Path, path: str) -> bool:
    try:
        return not stat.S_ISDIR((lower / path).lstat().st_mode)
    except OSError:
        return False


def _opaque(folder: Path) -> bool:
    try:
        return os.getxattr(folder, _OPAQUE) == b"y"
    except OSError:
        return False


def _lower_files(lower: Path, prefix: str) -> set[str]:
    """The lower layer's files and links under the directory `prefix` (ending in `/`)."""
    found: set[str] = set()
    top = lower / prefix
    if not top.is_dir() or top.is_symlink():
        return found
    for folder, dirs, files in os.walk(top):
        if ".git" in dirs:
            dirs.remove(".git")
        relative = os.path.relpath(folder, lower).replace(os.sep, "/")
        found.update(f"{relative}/{name}" for name in files)
        found.update(f"{relative}/{d}" for d in dirs if os.path.islink(os.path.join(folder, d)))
    return found
