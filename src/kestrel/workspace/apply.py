"""Apply a session's change set to the real checkout, all or nothing.

`check` refuses what may never be applied and flags what the person should look at. `apply_changes`
compares every path with what the session started from, merges the person's own edits made since
three ways, and writes the whole change through the journal (`kestrel.workspace.journal`) or
nothing at all. Refusals and conflicts are outcomes, not errors: the result says `applied=False`
and lists every one of them. `ApplyError` is for failures of the system and for a misused API.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.journal import (
    ApplyError,
    ApplyPending,
    Fault,
    RecoveryResult,
    Step,
    commit,
    ensure_idle,
    is_git_dir,
    locked,
    path_problem,
    recover,
)
from kestrel.workspace.merge import merge_text

__all__ = [
    "ApplyError",
    "ApplyPending",
    "ApplyResult",
    "Conflict",
    "Flag",
    "RecoveryResult",
    "Refusal",
    "apply_changes",
    "check",
    "merge_text",
    "recover",
]

# File names that run code or configure what runs, wherever they appear.
_SENSITIVE_NAMES = {
    ".envrc": "direnv runs it when a shell enters the folder",
    "Makefile": "make runs its recipes",
    "makefile": "make runs its recipes",
    "GNUmakefile": "make runs its recipes",
    "conftest.py": "pytest imports and runs it",
    "setup.py": "runs when the package is built or installed",
    "pyproject.toml": "names the build backend that runs on install",
    "package.json": "its scripts run on install",
    ".gitlab-ci.yml": "a CI pipeline: runs on push",
    "azure-pipelines.yml": "a CI pipeline: runs on push",
    "Jenkinsfile": "a CI pipeline: runs on push",
    ".pre-commit-config.yaml": "configures git hooks",
    ".gitattributes": "git reads it (filters, diff and merge drivers)",
    ".gitmodules": "git reads it (submodule URLs)",
}
# Folders whose every file is configuration that runs code.
_SENSITIVE_FOLDERS = {
    ".circleci": "a CI pipeline: runs on push",
    ".husky": "git hooks",
    ".githooks": "git hooks",
    ".vscode": "editor settings (tasks and launch configurations run commands)",
    ".idea": "editor settings (run configurations run commands)",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A change that may never be applied; the whole set is refused."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Flag:
    """A change that is applied, but that the person should be told about."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """A path the person changed too, in a way that cannot be merged with the session's change."""

    path: str
    reason: str
    merged_with_markers: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyResult:
    """What `apply_changes` did; `applied` is False when a conflict or refusal stopped it all.

    `written` holds every path given new content (merged ones too), `deleted` every path removed,
    `merged` those whose content came from a three-way merge.
    """

    applied: bool
    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    flags: tuple[Flag, ...] = ()


def check(changes: ChangeSet) -> tuple[list[Refusal], list[Flag]]:
    """Refusals for what may never be applied, and flags for sensitive files; reads no file."""
    refusals: list[Refusal] = []
    flags: list[Flag] = []
    seen: set[str] = set()
    for change in changes.changes:
        refusals.extend(_refusals(change, seen))
        seen.add(change.path)
        flags.extend(_flags(change))
    written = {change.path for change in changes.changes if change.new is not None}
    for path in sorted(written):
        for ancestor in _ancestors(path):
            if ancestor in written:
                reason = f"{ancestor!r} is written both as a file and as a folder"
                refusals.append(Refusal(path, reason))
    return refusals, flags


def _refusals(change: Change, seen: set[str]) -> list[Refusal]:
    found = [
        Refusal(path, problem)
        for path in (change.path, change.old_path)
        if path is not None and (problem := path_problem(path))
    ]
    if change.path in seen:
        found.append(Refusal(change.path, "the path is changed twice in one change set"))
    if any(side is not None and side.kind == "special" for side in (change.base, change.new)):
        reason = "special files (devices, sockets, fifos) are never applied"
        found.append(Refusal(change.path, reason))
    if change.new is not None and change.new.kind == "symlink":
        problem = _link_problem(change.path, change.new.data)
        if problem:
            found.append(Refusal(change.path, problem))
    return found


def _link_problem(path: str, data: bytes) -> str | None:
    """Why a symlink at `path` to `data` may not exist in a checkout, judged lexically, or None."""
    target = os.fsdecode(data)
    if not target or "\0" in target:
        return "the symlink's target is empty or contains a NUL byte"
    if target.startswith("/"):
        return f"the symlink points to the absolute path {target!r}"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        return f"the symlink's target {target!r} leads outside the checkout"
    if any(is_git_dir(part) for part in resolved.split("/")):
        return f"the symlink's target {target!r} leads into git internals (.git)"
    return None


def _flags(change: Change) -> list[Flag]:
    parts = change.path.split("/")
    reason = _SENSITIVE_NAMES.get(parts[-1])
    if reason is None and parts[-1].startswith(".env"):
        reason = "an environment file: often holds secrets and is loaded into processes"
    if reason is None and (".github", "workflows") in itertools.pairwise(parts):
        reason = "a CI workflow: runs on push"
    folder = next((part for part in parts[:-1] if part in _SENSITIVE_FOLDERS), None)
    if reason is None and folder is not None:
        reason = _SENSITIVE_FOLDERS[folder]
    flags = [Flag(change.path, reason)] if reason else []
    new, base = change.new, change.base
    was_executable = base is not None and base.kind == "file" and base.executable
    if new is not None and new.kind == "file" and new.executable and not was_executable:
        flags.append(Flag(change.path, "becomes executable"))
    return flags


def apply_changes(
    checkout: Path,
    changes: ChangeSet,
    journal_dir: Path,
    *,
    fault: Fault | None = None,
    on_commit: Callable[[ApplyResult], None] | None = None,
) -> ApplyResult:
    """Apply `changes` to `checkout` through a journal in `journal_dir`, all of it or none.

    Raises `ApplyPending` when an earlier apply awaits `recover`, and `ApplyError` when the
    checkout is not a folder, `journal_dir` lies inside it (other than in its `.git` folder, which
    no change may touch), or writing fails (undone first).
    `fault` is a hook point: it is called with each step name ("staged", "journaled", "op:N",
    "done", "cleanup") before that step; at "done" every file is in place. Tests raise from it
    to simulate a crash there. `on_commit` is called with the result the apply will have, once
    it is decided and before the journal is written (nothing in the checkout changed yet).
    """
    root = checkout.resolve()
    if not root.is_dir():
        raise ApplyError(f"the checkout {checkout} is not a folder")
    journal_at = journal_dir.resolve()
    if journal_at.is_relative_to(root) and not journal_at.is_relative_to(root / ".git"):
        raise ApplyError(f"the journal folder {journal_dir} must lie outside the checkout {root}")
    refusals, flags = check(changes)
    if refusals:
        return ApplyResult(applied=False, refusals=tuple(refusals), flags=tuple(flags))
    with locked(journal_dir):
        ensure_idle(journal_dir)
        plan = _Plan()
        doomed = {change.path for change in changes.changes if change.new is None}
        for change in changes.changes:
            plan.add(change, _plan_one(root, change, doomed))
        if plan.conflicts or plan.refusals:
            return ApplyResult(
                applied=False,
                conflicts=tuple(plan.conflicts),
                refusals=tuple(plan.refusals),
                flags=tuple(flags),
            )
        # Deletions first: they may empty a folder that a later write replaces with a file.
        steps = sorted(plan.steps, key=lambda step: step.new is not None)
        result = ApplyResult(
            applied=True,
            written=tuple(step.path for step in steps if step.new is not None),
            deleted=tuple(step.path for step in steps if step.new is None),
            merged=tuple(plan.merged),
            flags=tuple(flags),
        )
        if steps:
            if on_commit is not None:
                on_commit(result)
            commit(root, journal_dir, steps, fault)
    return result


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What a path must hold after the apply (None: nothing), and whether a merge decided it."""

    entry: Entry | None
    merged: bool = False


@dataclass(frozen=True, slots=True)
class _Merged:
    """A clean three-way merge; `step` is None when the checkout already holds the result."""

    step: Step | None


_Outcome = Step | _Merged | Conflict | Refusal | None


@dataclass(slots=True)
class _Plan:
    """The steps, merges, conflicts and refusals found so far."""

    steps: list[Step] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def add(self, change: Change, outcome: _Outcome) -> None:
        if isinstance(outcome, _Merged):
            self.merged.append(change.path)
            outcome = outcome.step
        if isinstance(outcome, Step):
            self.steps.append(outcome)
        elif isinstance(outcome, Conflict):
            self.conflicts.append(outcome)
        elif isinstance(outcome, Refusal):
            self.refusals.append(outcome)


def _plan_one(root: Path, change: Change, doomed: set[str]) -> _Outcome:
    """Decide one change against the checkout as it is now; None when there is nothing to do."""
    problem, made_dirs = _parents(root, change.path, doomed)
    if problem:
        return Refusal(change.path, problem)
    found = _read(root / change.path, change, doomed)
    if isinstance(found, Refusal | Conflict):
        return found
    current, perm = found
    wanted = _resolve(change, current)
    if isinstance(wanted, Conflict):
        return wanted
    step, entry, mode = None, wanted.entry, None
    if perm is not None and entry is not None and entry.kind == "file":
        mode = _with_x(perm, entry.executable)  # keep the person's other permission bits
    if entry != current:
        step = Step(change.path, entry, current, perm, mode, made_dirs if entry else ())
    return _Merged(step) if wanted.merged else step


def _parents(root: Path, path: str, doomed: set[str]) -> tuple[str | None, tuple[str, ...]]:
    """Why the folders on the way to `path` forbid writing it, and which of them are missing."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        prefix = "/".join(parts[:depth])
        missing = tuple("/".join(parts[:end]) for end in range(depth, len(parts)))
        folder = root / prefix
        try:
            info = folder.lstat()
        except FileNotFoundError:
            return None, missing
        if stat.S_ISLNK(info.st_mode):
            real = Path(os.path.realpath(folder))
            if not real.is_relative_to(root):
                return f"{prefix!r} is a symlink that leads outside the checkout", ()
            if any(is_git_dir(part) for part in real.relative_to(root).parts):
                return f"{prefix!r} is a symlink that leads into git internals (.git)", ()
            if not real.is_dir():
                return f"{prefix!r} is a symlink to something that is not a folder", ()
        elif not stat.S_ISDIR(info.st_mode):
            if prefix in doomed:  # deleted first, then a folder takes its place
                return None, missing
            return f"{prefix!r} is a file in the checkout, where the session has a folder", ()
    return None, ()


def _read(
    target: Path, change: Change, doomed: set[str]
) -> tuple[Entry | None, int | None] | Refusal | Conflict:
    """The checkout's entry at `target` and its permission bits (files only)."""
    try:
        info = target.lstat()
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: a parent is deleted first
        return None, None
    if stat.S_ISREG(info.st_mode):
        executable = bool(info.st_mode & stat.S_IXUSR)
        return Entry("file", target.read_bytes(), executable), stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Entry("symlink", os.fsencode(os.readlink(target))), None
    if not stat.S_ISDIR(info.st_mode):
        return Refusal(change.path, "the checkout has a special file (device, socket, fifo) here")
    if change.new is None:
        return Conflict(change.path, "deleted by the session, but a folder in the checkout now")
    if _emptied(target, change.path, doomed):
        return None, None
    return Refusal(change.path, "the checkout has a folder where the session has a file")


def _emptied(target: Path, path: str, doomed: set[str]) -> bool:
    """Whether the change set deletes everything inside the folder `target`, leaving no folder."""
    for folder, dirs, files in os.walk(target):
        if not dirs and not files:
            return False  # an empty folder would stay in the way
        here = Path(folder)
        for name in (*files, *(name for name in dirs if (here / name).is_symlink())):
            if f"{path}/{(here / name).relative_to(target).as_posix()}" not in doomed:
                return False
    return True


def _resolve(change: Change, current: Entry | None) -> _Wanted | Conflict:
    """Three-way decision between the session's base, the checkout now and the session's result."""
    path, base, new = change.path, change.base, change.new
    if current in (base, new):
        return _Wanted(new)
    if new is None:
        return Conflict(path, "deleted by the session, but changed in the checkout since")
    if base is None:
        return Conflict(path, "created by the session, and with other content in the checkout")
    if current is None:
        return Conflict(path, "changed by the session, but deleted in the checkout since")
    if not all(side.kind == "file" and b"\0" not in side.data for side in (base, current, new)):
        return Conflict(path, "changed by the session and in the checkout, and not mergeable text")
    text, clean = merge_text(base.data, current.data, new.data, name=path)
    if not clean:
        return Conflict(path, "the session and the checkout changed the same lines", text)
    # Each side may have flipped the executable bit; a flip on either side wins over no flip.
    executable = new.executable if current.executable == base.executable else current.executable
    return _Wanted(Entry("file", text, executable), merged=True)


def _with_x(perm: int, executable: bool) -> int:
    """`perm` with the executable bits set where it is readable (as git does), or cleared."""
    return perm | ((perm & 0o444) >> 2) if executable else perm & ~0o111


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]
