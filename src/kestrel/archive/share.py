"""A session's checkpoints in shared storage, so that any machine can go on with the session.

In cluster mode each machine has a data directory of its own. Every checkpoint a session
records is put into the object store as a git bundle of the commits since the one put before
(`workspaces/<session>/<count>-<commit>.bundle`, `count` the checkpoint's depth in the
session's linear history, so the keys sort in the order they must be read), before the
checkpoint is returned and so before the log can name it. A machine that takes the session
over reads the bundles it lacks into its own shadow repository, in order, and the session's
worktree is made to hold the files of the checkpoint its log names (`CheckpointStore.
materialise`).

The session's checkout itself is not shared: each machine has the repository at the same path
(a clone of the same commit), as the server's repositories are laid out. Files git ignores
(build output, caches) are not in checkpoints and do not travel; the next build makes them.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from pathlib import Path

from kestrel.archive.blobs import Blobs
from kestrel.archive.checkpoints import shadow_git
from kestrel.archive.errors import ArchiveDamaged, ArchiveUnavailable
from kestrel.workspace.shadow_git import CheckpointError, ShadowGit, init_shadow

logger = logging.getLogger(__name__)

PREFIX = "workspaces"
_KEY = re.compile(r"(\d{8})-([0-9a-f]{40,64})\.bundle")
_REFS = "refs/kestrel/checkpoints"
_SHARED = "refs/kestrel/shared"
"""The newest commit of the session known to be in shared storage (put or read)."""
PUT_TRIES_S = 30.0
"""How long a checkpoint's bundle is tried again while the object store cannot be reached."""


class WorkspaceShare:
    """One session's checkpoints in one shadow repository, put to and read from `blobs`."""

    def __init__(self, blobs: Blobs, git_dir: Path, session_id: str) -> None:
        self.blobs = blobs
        self.git_dir = git_dir
        self.session_id = session_id
        self.ref = f"{_REFS}/{session_id}"
        self.shared = f"{_SHARED}/{session_id}"

    def put(self, commit: str) -> None:
        """Store the commits up to `commit` that shared storage lacks, as one bundle.

        Tried again for up to `PUT_TRIES_S` while the store is unreachable; then
        `ArchiveUnavailable`, and the next checkpoint's bundle carries these commits too.
        """
        git = self._git()
        since = self._known(git, self.shared)
        if since == commit:
            return
        count = int(git.text("rev-list", "--count", commit))
        key = f"{PREFIX}/{self.session_id}/{count:08d}-{commit}.bundle"
        with tempfile.TemporaryDirectory(dir=self.git_dir) as tmp:
            out = Path(tmp) / "put.bundle"
            # The session's ref is at `commit` now (the store moves it before calling us).
            not_again = [f"^{since}"] if since else []
            git.run("bundle", "create", "--quiet", str(out), self.ref, *not_again)
            self._put(key, out)
        git.run("update-ref", self.shared, commit)

    def bring(self, commit: str) -> bool:
        """Read the bundles this repository lacks, up to `commit`; False when shared storage
        does not hold `commit` (its session put nothing there, or the put failed)."""
        git = self._git()
        if self._has(git, commit):
            return True
        keys = self.blobs.keys(f"{PREFIX}/{self.session_id}/")
        found = [(m, k) for k in keys if (m := _KEY.fullmatch(k.rsplit("/", 1)[-1]))]
        with tempfile.TemporaryDirectory(dir=self.git_dir) as tmp:
            for match, key in found:
                if self._has(git, match.group(2)):
                    continue
                path = Path(tmp) / "read.bundle"
                self.blobs.fetch(key, path)
                try:
                    git.run("bundle", "unbundle", str(path))
                except CheckpointError as exc:
                    raise ArchiveDamaged(f"{key} cannot be read: {exc}") from None
                git.run("update-ref", self.shared, match.group(2))
                if match.group(2) == commit:
                    break
        return self._has(git, commit)

    def advance(self, commit: str) -> None:
        """Move the session's ref to `commit` when it lacks it or is behind it (never back)."""
        git = self._git()
        head = self._known(git, self.ref)
        if head == commit:
            return
        if head and git.run("merge-base", "--is-ancestor", head, commit, check=False).returncode:
            return
        git.run("update-ref", self.ref, commit)

    def _put(self, key: str, out: Path) -> None:
        deadline, pause = time.monotonic() + PUT_TRIES_S, 0.2
        while True:
            try:
                self.blobs.put(key, out)
                return
            except ArchiveUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise
                logger.warning("checkpoint not stored yet, trying again: %s", exc)
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    def _git(self) -> ShadowGit:
        init_shadow("git", self.git_dir, os.environ)
        return shadow_git(self.git_dir)

    @staticmethod
    def _known(git: ShadowGit, ref: str) -> str:
        found = git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return found.stdout.decode().strip() if found.returncode == 0 else ""

    @staticmethod
    def _has(git: ShadowGit, commit: str) -> bool:
        found = git.run("cat-file", "-e", f"{commit}^{{commit}}", check=False)
        return found.returncode == 0
