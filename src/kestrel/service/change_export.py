"""A session's whole change as a git patch or a git bundle, read from its checkpoints.

The change is read from the shadow repository the session's runs record its files in, never
from its overlay, so any process may read it (a multi-threaded server too) while the session
runs, while the change waits for review, and after it was applied. It runs from the session's
first checkpoint (the checkout as the session found it) to the newest one when a change waits
for review, else to the last one applied; a discarded change is no part of it. A bundle is made
in a scratch repository that reads the checkout's and the checkpoints' objects and writes
neither.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kestrel import app_share
from kestrel.app import checkpointer_for
from kestrel.gitsafe import GitRun, GitUnavailable, NotARepository, open_repository, run_git
from kestrel.gitsafe.layout import UnsafeRepository
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import ChangesApplied, CheckpointCreated, Event, SessionStarted
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.workspace.handoff import applied_base
from kestrel.workspace.overlay import layer_for

ChangeState = Literal["none", "pending", "applied"]
"""none: no change; pending: (part of) it waits for review; applied: all of it was applied."""

_GIT_TIMEOUT_S = 120.0
_IDENTITY = ("-c", "user.name=Kestrel", "-c", "user.email=kestrel@localhost")
_DIFF = ("diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", "-M")
_UNREADABLE = (
    "the session's change cannot be read right now; try again, and if it persists ask the "
    "server's operator to check that git works there"
)


class ChangeUnavailable(KestrelError):
    """The change cannot be exported now; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class SessionChange:
    """Where a session's change is recorded: the checkpoints it runs between, and its state."""

    session_id: str
    state: ChangeState
    checkout: Path
    task: str = ""
    shadow: Path | None = None
    first: str = ""
    final: str = ""


def session_change(store: EventStore, session_id: str, data_dir: Path) -> SessionChange:
    """The session's change and whether it waits for review or was applied; `data_dir` is
    where its runs keep their data (their checkpoints among it)."""
    events = [record.event for record in store.read(session_id)]
    started = events[0] if events else None
    if not isinstance(started, SessionStarted):
        raise ChangeUnavailable(f"session {session_id} has no start in its log yet; try again")
    none = SessionChange(session_id, "none", Path(started.cwd), started.task)
    ref = f"refs/kestrel/checkpoints/{session_id}"
    _bring_shared(data_dir, session_id, none.checkout, events)
    shadow = _shadow(data_dir, session_id, none.checkout, ref)
    if shadow is None:
        return none  # No checkpoint yet: no tool has changed a file.
    head = _text(shadow, "rev-parse", "--verify", f"{ref}^{{commit}}")
    first = _text(shadow, "rev-list", "--max-parents=0", ref, "--").split()[-1]
    final, state = _final(shadow, events, first, head)
    if state == "none":
        return none
    return SessionChange(session_id, state, none.checkout, started.task, shadow, first, final)


def change_patch(change: SessionChange) -> bytes:
    """The change as a unified git diff (binary files included); empty when there is none."""
    if change.shadow is None:
        return b""
    args = (*_DIFF, "--src-prefix=a/", "--dst-prefix=b/", change.first, change.final, "--")
    return _checked(_git_dir(change.shadow, *args)).stdout


def change_bundle(change: SessionChange, *, full: bool = False) -> bytes:
    """A git bundle of one commit, the change on top of the checkout's HEAD, as branch
    `kestrel/<session id>` and HEAD; without the base's history unless `full`."""
    if change.shadow is None:
        raise ChangeUnavailable(
            f"session {change.session_id} has changed no file, so there is no commit to bundle"
        )
    try:
        checkout = open_repository(change.checkout)
    except (NotARepository, UnsafeRepository, GitUnavailable):
        raise ChangeUnavailable(
            "the session's checkout is gone or unreadable, so the commit it started from is "
            "unknown; download the patch instead"
        ) from None
    head = _run(checkout.work_tree, ("rev-parse", "--verify", "HEAD^{commit}"), repository=True)
    base = _checked(head).stdout.decode().strip()
    objects = (change.shadow / "objects", checkout.common_dir / "objects")
    with tempfile.TemporaryDirectory(prefix="kestrel-bundle-") as scratch:
        work = Path(scratch) / "repo"
        _checked(_run(Path(scratch), ("init", "-q", "--template=", str(work)), repository=False))
        alternates = work / ".git" / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text("".join(f"{folder}\n" for folder in objects))
        commit = _commit(work, base, change_patch(change), _message(change))
        branch = f"refs/heads/kestrel/{change.session_id}"
        _git(work, "update-ref", branch, commit)
        _git(work, "symbolic-ref", "HEAD", branch)
        out = Path(scratch) / "session.bundle"
        _git(
            work,
            "bundle",
            "create",
            "-q",
            str(out),
            "HEAD",
            branch,
            *([] if full else [f"^{base}"]),
        )
        return out.read_bytes()


def _final(shadow: Path, events: Sequence[Event], first: str, head: str) -> tuple[str, ChangeState]:
    """The checkpoint the change runs up to, and its state."""
    base = applied_base(events) or first
    if _tree(shadow, base) != _tree(shadow, head):
        return head, "pending"
    applied = [e for e in events if isinstance(e, ChangesApplied) and e.outcome == "applied"]
    final = applied[-1].checkpoint_id if applied else first
    return final, "none" if _tree(shadow, final) == _tree(shadow, first) else "applied"


def _bring_shared(data_dir: Path, session_id: str, checkout: Path, events: list[Event]) -> None:
    """With checkpoints in shared storage (cluster mode, a data folder per machine), bring the
    log's newest one into this machine's shadow repository first."""
    url = os.environ.get("KESTREL_WORKSPACE_SHARE_URL", "").strip()
    marks = [e.checkpoint_id for e in events if isinstance(e, CheckpointCreated)]
    if url and url.lower() != "none" and marks:
        settings = Settings(data_dir=data_dir, workspace_share_url=url)
        app_share.bring(settings, checkout, session_id, marks[-1])


def _shadow(data_dir: Path, session_id: str, checkout: Path, ref: str) -> Path | None:
    """The shadow repository of the session's checkpoints: keyed by the folder the session
    worked in, the checkout itself (a kernel overlay, or none) or the copy in its layer."""
    settings = Settings(data_dir=data_dir)
    for root in (checkout, layer_for(data_dir, session_id).tree):
        git_dir = checkpointer_for(settings, root, session_id).store.git_dir
        if (git_dir / "HEAD").is_file() and _git_dir(git_dir, "rev-parse", "--verify", ref).ok:
            return git_dir
    return None


def _commit(work: Path, base: str, patch: bytes, message: str) -> str:
    """A commit of `patch` applied on `base`, made through the scratch repository's index."""
    _git(work, "read-tree", base)
    if patch:
        applied = _run(work, ("apply", "--cached", "--binary"), repository=True, stdin=patch)
        if not applied.ok:
            raise ChangeUnavailable(
                "the change does not apply to the commit the session started from; "
                "download the patch and apply it by hand"
            )
    tree = _git(work, "write-tree")
    return _git(work, *_IDENTITY, "commit-tree", tree, "-p", base, "-m", message)


def _message(change: SessionChange) -> str:
    task = change.task.strip()
    subject = (task.splitlines() or ["Kestrel's change"])[0]
    subject = subject if len(subject) <= 72 else subject[:71] + "…"
    body = f"\n\n{task}" if task and task != subject else ""
    return f"{subject}{body}\n\nKestrel session {change.session_id}\n"


def _tree(shadow: Path, commit: str) -> str:
    return _text(shadow, "rev-parse", "--verify", f"{commit}^{{tree}}")


def _text(shadow: Path, *args: str) -> str:
    return _checked(_git_dir(shadow, *args)).stdout.decode().strip()


def _git(work: Path, *args: str) -> str:
    return _checked(_run(work, args, repository=True)).stdout.decode().strip()


def _git_dir(git_dir: Path, *args: str) -> GitRun:
    """git on a bare repository of the data folder: no work tree, no discovery."""
    return _run(git_dir, ("--git-dir", str(git_dir), *args), repository=False)


def _run(cwd: Path, args: Sequence[str], *, repository: bool, stdin: bytes | None = None) -> GitRun:
    try:
        return run_git(cwd, args, stdin=stdin, repository=repository, timeout_s=_GIT_TIMEOUT_S)
    except (GitUnavailable, NotARepository, UnsafeRepository):
        raise ChangeUnavailable(_UNREADABLE) from None


def _checked(done: GitRun) -> GitRun:
    if not done.ok:
        raise ChangeUnavailable(_UNREADABLE)
    return done
