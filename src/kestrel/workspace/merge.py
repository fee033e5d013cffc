"""Three-way merge of one text file: the checkout's version and the session's, from their base.

`git merge-file` does the merge, through Kestrel's hardened git call, in a fresh temporary folder
and environment, so neither the user's config nor a repository around it can change the marker
style or run a merge driver.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from kestrel.gitsafe import GitUnavailable, run_git
from kestrel.workspace.journal import ApplyError

__all__ = ["merge_text"]


def merge_text(base: bytes, current: bytes, new: bytes, *, name: str = "") -> tuple[bytes, bool]:
    """Merge `current` and `new` from `base` with `git merge-file`; the text and whether clean."""
    with tempfile.TemporaryDirectory(prefix="kestrel-merge-") as folder:
        for side, data in (("checkout", current), ("base", base), ("session", new)):
            Path(folder, side).write_bytes(data)
        # A fresh environment: neither the user's config nor a repository around the temporary
        # folder may change the marker style or run a merge driver.
        labels = ("-L", "checkout", "-L", "base", "-L", "session")
        command = ["merge-file", "-p", *labels, "checkout", "base", "session"]
        try:
            done = run_git(Path(folder), command, repository=False)
        except GitUnavailable as error:
            raise ApplyError(f"cannot run git to merge {name}: {error}") from error
    # The exit status counts conflicts (at most 127); git's own failures exit 255.
    if not 0 <= done.returncode <= 127:
        stderr = done.stderr.decode("utf-8", errors="replace").strip()
        raise ApplyError(f"git merge-file failed on {name} ({done.returncode}): {stderr}")
    return done.stdout, done.returncode == 0
