"""Handing a session's change over: review it as events, apply it, or throw it away.

The change runs from a base checkpoint (the session's first, or the last one applied) to the
newest. These functions turn it into `changes_ready` and `changes_applied` events; the caller
logs them. The checkout is written only through the apply journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.events import (
    ChangedFile,
    ChangesApplied,
    ChangesReady,
    CheckpointCreated,
    Event,
)
from kestrel.workspace.apply import ApplyResult, apply_changes, check
from kestrel.workspace.changes import ChangeSet
from kestrel.workspace.checkpoints import CheckpointStore
from kestrel.workspace.review import summary_line

MAX_LISTED = 200
"""Changed paths listed in one `changes_ready` event."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A change waiting for review: its content and the checkpoints it runs between."""

    changes: ChangeSet
    base: str | None
    head: str


def applied_base(events: Sequence[Event]) -> str | None:
    """Where the next change starts: the checkpoint the last applied or discarded change ran up
    to, or a later baseline recorded when a new overlay opened; None for the first checkpoint."""
    for event in reversed(events):
        if isinstance(event, ChangesApplied) and event.outcome in ("applied", "discarded"):
            return event.checkpoint_id
        if isinstance(event, CheckpointCreated) and event.baseline:
            return event.checkpoint_id
    return None


def pending_change(checkpoints: CheckpointStore, events: Sequence[Event]) -> Pending | None:
    """The session's change not yet applied, or None when there is none."""
    head = checkpoints.head_id()
    if head is None:
        return None
    base = applied_base(events)
    if base == head:
        return None
    changes = checkpoints.change_set(base, head)
    return Pending(changes, base, head) if changes else None


def ready_event(pending: Pending) -> ChangesReady:
    """The `changes_ready` event for a pending change, with its flagged paths."""
    refusals, flags = check(pending.changes)
    renamed_from = {c.old_path for c in pending.changes.changes if c.old_path}
    files = tuple(
        ChangedFile(
            path=c.path,
            status="M" if c.status == "T" else c.status,
            old_path=c.old_path,
        )
        for c in pending.changes.changes
        if not (c.status == "D" and c.path in renamed_from)
    )
    noted = [f"{r.path}: {r.reason}" for r in refusals] + [f"{f.path}: {f.reason}" for f in flags]
    return ChangesReady(
        checkpoint_id=pending.head,
        files=files[:MAX_LISTED],
        flagged=tuple(noted),
        summary=summary_line(pending.changes),
    )


def apply_pending(pending: Pending, checkout: Path, journal: Path) -> ChangesApplied:
    """Apply the change to `checkout` all-or-nothing; the event says what became of it."""
    result = apply_changes(checkout, pending.changes, journal)
    return applied_event(result, pending.head)


def applied_event(result: ApplyResult, head: str) -> ChangesApplied:
    """The `changes_applied` event for an apply's result."""
    if result.applied:
        return ChangesApplied(
            outcome="applied",
            checkpoint_id=head,
            written=result.written,
            deleted=result.deleted,
            merged=result.merged,
        )
    problems = [f"{c.path}: {c.reason}" for c in result.conflicts]
    problems += [f"{r.path}: {r.reason}" for r in result.refusals]
    return ChangesApplied(
        outcome="conflicts" if result.conflicts else "refused",
        checkpoint_id=head,
        problems=tuple(problems),
    )


def discarded_event(head: str) -> ChangesApplied:
    """The `changes_applied` event for a change the person threw away."""
    return ChangesApplied(outcome="discarded", checkpoint_id=head)
