"""Checkpoints: snapshots of a workspace in a shadow git repository kept outside the checkout.

A `CheckpointStore` records the files of a worktree as commits on one ref per session inside a
bare repository of its own (`git_dir`), through a private index file. The user's repository is
never written, and its config and hooks are never read. Its `.gitignore` files and
`info/exclude` decide which files are left out (as they would be from `git status`), and its
index and objects seed a session's first checkpoint (see `checkpoint_seed`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from kestrel.workspace.changes import ChangeSet
from kestrel.workspace.checkpoint_scope import exclude_virtual_environments
from kestrel.workspace.checkpoint_seed import locate_checkout_git, seed_index
from kestrel.workspace.review import build_change_set
from kestrel.workspace.shadow_git import (
    CheckpointError,
    GitFailed,
    ShadowGit,
    UnknownCheckpoint,
    exclude_pattern,
    init_shadow,
    shadow_env,
)
from kestrel.workspace.upper_index import OverlayLayers, index_from_upper, present_in_upper

ChangeStatus = Literal["A", "M", "D", "R"]

_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_ID_PREFIX = re.compile(r"[0-9a-f]{4,64}")
# A header token of our `git log` format: ASCII SOH, then commit, tree and time, then the label.
_HEADER = re.compile(rb"\n?\x01([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (\d+)\n(.*)", re.DOTALL)
_LOG_FORMAT = "--format=%x01%H %T %ct%n%B"
# `git diff --name-status` letters, folded into the four that callers need.
_STATUS: dict[bytes, ChangeStatus] = {b"A": "A", b"C": "A", b"D": "D", b"M": "M", b"T": "M"}


@dataclass(frozen=True, slots=True)
class FileChange:
    """One path that differs from the previous checkpoint; `old_path` is set for renames."""

    path: str
    status: ChangeStatus
    old_path: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A recorded state of the worktree: commit id, label, time, tree id and what changed."""

    id: str
    label: str
    created_at: datetime
    tree: str
    changes: tuple[FileChange, ...]


class CheckpointStore:
    """Records, lists, compares and restores checkpoints of one worktree for one session.

    `git_dir` is the shadow repository (created on first use; it must lie outside `worktree`).
    Several sessions may share one `git_dir`; each has its own ref and index. Methods are
    blocking and serialised per store; call them from a worker thread in async code. With
    `seed` false, a session's first checkpoint never starts from the checkout's own index
    (every file is hashed, as when that index is missing or unusable).
    """

    def __init__(
        self,
        worktree: Path,
        git_dir: Path,
        *,
        git: str = "git",
        session: str = "default",
        clock: Callable[[], float] = time.time,
        seed: bool = True,
        layers: OverlayLayers | None = None,
        on_recorded: Callable[[str], None] | None = None,
    ) -> None:
        self.worktree = worktree.resolve()
        self.git_dir = git_dir.resolve()
        if self.git_dir == self.worktree or self.git_dir.is_relative_to(self.worktree):
            raise CheckpointError(f"the shadow repository {git_dir} must lie outside {worktree}")
        if not _SESSION_NAME.fullmatch(session):
            raise CheckpointError(f"not a usable session name for a checkpoint ref: {session!r}")
        self.ref = f"refs/kestrel/checkpoints/{session}"
        self._git_program = git
        self._clock = clock
        self._lock = threading.Lock()
        self._index_file = self.git_dir / "kestrel-index" / session
        self._seed = seed
        self._layers = layers
        # Called with each new checkpoint's id before it is returned (shared storage, say).
        self._on_recorded = on_recorded
        # Files the upper layer held at the last checkpoint, when the next may look only at the
        # paths the layer names; None: the next one walks the whole worktree.
        self._seen: frozenset[str] | None = None
        checkout = locate_checkout_git(self.worktree)
        user_exclude = checkout.exclude if checkout is not None else None
        env = shadow_env(
            git_dir=self.git_dir,
            worktree=self.worktree,
            index_file=self._index_file,
            excludes_file=user_exclude if user_exclude and user_exclude.is_file() else None,
            base=os.environ,
        )
        self._git = ShadowGit(git, self.worktree, env)
        self._ready = False

    def snapshot(self, label: str) -> Checkpoint | None:
        """Record the worktree as a new checkpoint; None when nothing changed since the last one.

        The first snapshot of a session is always recorded, even for an empty worktree.
        """
        with self._lock:
            self._ensure_ready()
            return self._record(self._index_worktree(), label)

    def list(self) -> list[Checkpoint]:
        """Every checkpoint of this session, oldest first, each with its changes."""
        with self._lock:
            self._ensure_ready()
            if self._head() is None:
                return []
            out = self._git.run(
                "log",
                "-z",
                "--reverse",
                "--root",
                "-M",
                "--name-status",
                "--no-color",
                _LOG_FORMAT,
                self.ref,
                "--",
            ).stdout
            return parse_log(out)

    def get(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint with this id or unique id prefix; raises `UnknownCheckpoint`."""
        full = self.resolve(checkpoint_id)
        return next(c for c in self.list() if c.id == full)

    def resolve(self, checkpoint_id: str) -> str:
        """The full commit id of this session's checkpoint named by an id or unique id prefix."""
        with self._lock:
            self._ensure_ready()
            return self._resolve(checkpoint_id)

    def diff(self, a: str, b: str | None = None) -> str:
        """Unified diff from checkpoint `a` to checkpoint `b`, or to the worktree when b is None."""
        with self._lock:
            self._ensure_ready()
            old = self._resolve(a)
            common = (
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "-M",
                "--src-prefix=a/",
                "--dst-prefix=b/",
            )
            if b is None:
                self._index_worktree()
                result = self._git.run(*common, "--cached", old, "--")
            else:
                result = self._git.run(*common, old, self._resolve(b), "--")
            return result.stdout.decode("utf-8", errors="replace")

    def head_id(self) -> str | None:
        """The newest checkpoint's id, or None before the first."""
        with self._lock:
            self._ensure_ready()
            head = self._head()
            return head[0] if head else None

    def change_set(self, base: str | None = None, head: str | None = None) -> ChangeSet:
        """What changed from `base` (default: the first checkpoint) to `head` (default: newest).

        Empty before the first checkpoint.
        """
        with self._lock:
            self._ensure_ready()
            if self._head() is None:
                return ChangeSet(changes=())
            start = (
                self._resolve(base)
                if base
                else self._git.text("rev-list", "--max-parents=0", self.ref, "--")
            )
            end = self._resolve(head) if head else self.ref
            return build_change_set(self._git, start, end)

    def restore(self, checkpoint_id: str, *, label: str | None = None) -> Checkpoint | None:
        """Make the worktree exactly the checkpoint's files; returns the rewind's own checkpoint.

        Unrecorded changes are first saved as a checkpoint labelled "before rewind to ID", so a
        rewind can itself be undone. The restored state is then recorded as a new checkpoint
        (default label "rewind to ID"), so `list()` stays a linear history of what the worktree
        held. Returns None when the worktree already matched. Ignored files, the user's `.git`
        and empty directories are left alone.
        """
        with self._lock:
            self._ensure_ready()
            target = self._resolve(checkpoint_id)
            short = target[:12]
            self._record(self._index_worktree(), f"before rewind to {short}")
            tree = self._git.text("rev-parse", f"{target}^{{tree}}")
            # The index now lists every recorded file, so a one-way reset removes the files the
            # checkpoint lacks, rewrites the ones that differ (content or mode) and leaves the rest.
            self._git.run("read-tree", "-u", "--reset", tree)
            self._seen = None  # The next checkpoint walks the worktree once more.
            return self._record(tree, label if label is not None else f"rewind to {short}")

    def descends(self, commit: str, ancestor: str) -> bool:
        """Whether `ancestor` is `commit` or one of its ancestors (False for an unknown one)."""
        with self._lock:
            self._ensure_ready()
            found = self._git.run("merge-base", "--is-ancestor", ancestor, commit, check=False)
            return found.returncode == 0

    def materialise(self, commit: str) -> None:
        """Make the worktree hold the files of `commit`, a checkpoint recorded elsewhere and
        already in the shadow repository, and point the session's ref at it, recording nothing:
        the session goes on from the checkpoint its log names, on a machine that lacked it."""
        with self._lock:
            self._ensure_ready()
            self._index_worktree()  # So that only the files that differ are written.
            tree = self._git.text("rev-parse", "--verify", f"{commit}^{{tree}}")
            self._git.run("read-tree", "-u", "--reset", tree)
            self._git.run("update-ref", self.ref, commit)
            self._seen = None

    def _ensure_ready(self) -> None:
        if not self._ready:
            init_shadow(self._git_program, self.git_dir, os.environ)
            (self.git_dir / "kestrel-index").mkdir(exist_ok=True)
            self._ready = True

    def _index_worktree(self) -> str:
        """Bring the private index in line with the worktree; return the tree id it describes."""
        if self._seed and not self._index_file.exists() and self._head() is None:
            # A session's first checkpoint starts from the checkout's own index when it can, so
            # that only files changed since the checkout's last `git add` or checkout are read.
            seed_index(self._git, self.git_dir, self._index_file, self.worktree)
        exclude_virtual_environments(self.worktree, self.git_dir / "info" / "exclude")
        if self._layers is not None and self._seen is not None:
            tree = index_from_upper(self._git, self.worktree, self._layers, self._seen)
            if tree is not None:
                self._seen, tree_id = tree
                return tree_id
        self._seen = None
        add = ("add", "--all", "--", ".")
        first = self._git.run(*add, check=False)
        if first.returncode != 0:
            # A nested repository without a commit cannot be added even as a pointer; leave such
            # directories out from now on and try once more, so that one `git init` by a tool
            # does not stop every later checkpoint.
            if not self._exclude_nested_repositories():
                raise GitFailed(("add", "--all"), first.returncode, first.stderr)
            self._git.run(*add)
        if self._layers is not None:
            self._seen = present_in_upper(self.worktree, self._layers)
        return self._git.text("write-tree")

    def _exclude_nested_repositories(self) -> bool:
        listing = self._git.run("ls-files", "-z", "--others", "--exclude-standard").stdout
        nested = [
            os.fsdecode(entry)
            for entry in listing.split(b"\0")
            if entry.endswith(b"/") and (self.worktree / os.fsdecode(entry) / ".git").exists()
        ]
        if not nested:
            return False
        with (self.git_dir / "info" / "exclude").open("a", encoding="utf-8") as exclude:
            exclude.writelines(exclude_pattern(path) + "\n" for path in nested)
        return True

    def _head(self) -> tuple[str, str] | None:
        """The session's newest checkpoint as (commit id, tree id), or None before the first."""
        line = self._git.text("for-each-ref", "--format=%(objectname) %(tree)", self.ref)
        if not line:
            return None
        commit, tree = line.split()
        return commit, tree

    def _record(self, tree: str, label: str) -> Checkpoint | None:
        label = clean_label(label)
        head = self._head()
        if head is not None and head[1] == tree:
            return None
        seconds = int(self._clock())
        stamp = {"GIT_AUTHOR_DATE": f"@{seconds} +0000", "GIT_COMMITTER_DATE": f"@{seconds} +0000"}
        message = label.encode("utf-8", errors="replace")
        parents = ("-p", head[0]) if head else ()
        commit = (
            self._git.run(
                "commit-tree",
                "--no-gpg-sign",
                *parents,
                tree,
                "-F",
                "-",
                stdin=message,
                extra_env=stamp,
            )
            .stdout.decode()
            .strip()
        )
        self._git.run("update-ref", self.ref, commit, head[0] if head else "0" * len(commit))
        if self._on_recorded is not None:
            self._on_recorded(commit)
        listing = self._git.run(
            "diff-tree", "-z", "-r", "--root", "-M", "--name-status", "--no-commit-id", commit
        ).stdout
        changes = parse_changes(listing.split(b"\0"))
        created = datetime.fromtimestamp(seconds, UTC)
        return Checkpoint(id=commit, label=label, created_at=created, tree=tree, changes=changes)

    def _resolve(self, checkpoint_id: str) -> str:
        wanted = checkpoint_id.strip().lower()
        if not _ID_PREFIX.fullmatch(wanted) or self._head() is None:
            raise UnknownCheckpoint(f"no checkpoint {checkpoint_id!r} in {self.ref}")
        commits = self._git.run("rev-list", self.ref, "--").stdout.decode().split()
        matches = [commit for commit in commits if commit.startswith(wanted)]
        if len(matches) != 1:
            why = "is ambiguous" if matches else "is unknown"
            raise UnknownCheckpoint(f"checkpoint {checkpoint_id!r} {why} in {self.ref}")
        return matches[0]


def clean_label(label: str) -> str:
    """The label as it will be stored: NUL bytes become spaces, trailing newlines are dropped."""
    return label.replace("\0", " ").rstrip("\n")


def parse_changes(tokens: list[bytes]) -> tuple[FileChange, ...]:
    """Read NUL-split `--name-status -z` output (status, path[, new path], ...) into changes."""
    changes: list[FileChange] = []
    position = 0
    while position < len(tokens):
        status = tokens[position].lstrip(b"\n")
        if not status:
            position += 1
            continue
        if status[:1] in (b"R", b"C"):
            old, new = os.fsdecode(tokens[position + 1]), os.fsdecode(tokens[position + 2])
            renamed = status[:1] == b"R"
            changes.append(FileChange(new, "R", old) if renamed else FileChange(new, "A"))
            position += 3
            continue
        changes.append(FileChange(os.fsdecode(tokens[position + 1]), _STATUS.get(status, "M")))
        position += 2
    return tuple(changes)


def parse_log(output: bytes) -> list[Checkpoint]:
    """Read `git log -z --name-status` output in this module's format into checkpoints."""
    checkpoints: list[Checkpoint] = []
    tokens = output.split(b"\0")
    position = 0
    while position < len(tokens):
        header = _HEADER.fullmatch(tokens[position])
        if header is None:
            position += 1
            continue
        # Paths are consumed by count after each status, so a path can never pass for a header.
        end = position + 1
        while end < len(tokens) and _HEADER.fullmatch(tokens[end]) is None:
            status = tokens[end].lstrip(b"\n")
            end += 3 if status[:1] in (b"R", b"C") else 2 if status else 1
        commit, tree, seconds, label = header.groups()
        checkpoints.append(
            Checkpoint(
                id=commit.decode(),
                label=label.decode("utf-8", errors="replace").rstrip("\n"),
                created_at=datetime.fromtimestamp(int(seconds), UTC),
                tree=tree.decode(),
                changes=parse_changes(tokens[position + 1 : end]),
            )
        )
        position = end
    return checkpoints
