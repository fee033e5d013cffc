"""Handing a session's change over: review it as events, apply it, or throw it away.

The change runs from a base checkpoint (the session's first, or the last one applied) to the
newest. These functions turn it into `changes_ready` and `changes_applied` events; the caller
logs them. The checkout is written only through the apply journal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from kestrel.workspace.shadow_git import CheckpointError
from kestrel.workspace.verify.changed_text import Baseline
from kestrel.workspace.verify.security import GateReport, finding_lines, override_hint

MAX_LISTED = 200
"""Changed paths listed in one `changes_ready` event."""
MAX_FINDINGS_LISTED = 50
"""Security findings of each kind (blocking, reported) listed in one event."""


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


def ready_event(pending: Pending, gate: GateReport | None = None) -> ChangesReady:
    """The `changes_ready` event for a pending change, with its flagged paths and what the
    security gate found."""
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
    if gate is not None:
        blocking = finding_lines(gate.blocking, MAX_FINDINGS_LISTED)
        noted += [f"{line} (blocks the apply)" for line in blocking]
        noted += finding_lines(gate.reported, MAX_FINDINGS_LISTED)
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


def applied_event(result: ApplyResult, head: str, accepted: tuple[str, ...] = ()) -> ChangesApplied:
    """The `changes_applied` event for an apply's result; `accepted` names the security
    findings the person accepted to have it applied."""
    if result.applied:
        return ChangesApplied(
            outcome="applied",
            checkpoint_id=head,
            written=result.written,
            deleted=result.deleted,
            merged=result.merged,
            accepted_findings=accepted,
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


def security_refused(gate: GateReport, head: str, session_id: str) -> ChangesApplied:
    """The `changes_applied` event for a change the security gate stops: nothing is written,
    and the problems say what was found and how a person accepts it."""
    problems = (*finding_lines(gate.blocking, MAX_FINDINGS_LISTED), override_hint(gate, session_id))
    return ChangesApplied(outcome="refused", checkpoint_id=head, problems=problems)


def baseline_from(checkpoints: CheckpointStore, events: Callable[[], Sequence[Event]]) -> Baseline:
    """What each file of the session's pending change held where the change began, read from
    its checkpoints (for the security gate in verification); unknown (None) when they cannot
    be read."""

    def baseline(paths: Sequence[str]) -> Mapping[str, bytes | None] | None:
        try:
            pending = pending_change(checkpoints, events())
        except CheckpointError:
            return None
        if pending is None:
            return {}
        changes = pending.changes.changes
        bases = {change.path: change.base for change in changes}
        found: dict[str, bytes | None] = {}
        for change in changes:
            if change.new is None:
                continue
            base = bases.get(change.old_path) if change.old_path else change.base
            found[change.path] = base.data if base is not None and base.kind == "file" else None
        return found

    return baseline
