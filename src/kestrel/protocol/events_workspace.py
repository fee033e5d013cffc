"""Events of the workspace: checkpoints, rewinds, verification, the change and its apply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangedFile:
    """One path that differs from the previous checkpoint: added, modified, deleted or renamed."""

    path: str
    status: Literal["A", "M", "D", "R"]
    old_path: str | None = None


ApplyOutcome = Literal["applied", "conflicts", "refused", "discarded"]
CheckStatus = Literal["passed", "failed", "error", "skipped", "timed_out"]
FailureKind = Literal["test", "lint", "type", "syntax", "build", "security", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOutcome:
    """How one verification check ended, e.g. `pytest` failed with 2 failures."""

    name: str
    status: CheckStatus
    failures: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyFailure:
    """One structured failure of a check: where, which test, what it said."""

    kind: FailureKind
    tool: str
    message: str
    file: str | None = None
    line: int | None = None
    test: str | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationFinished:
    """The changed files were checked: syntax, the project's linters and its related tests."""

    type: Literal["verification_finished"] = "verification_finished"
    round: int = 1
    """The how-many-th verification since the person last wrote; failed rounds are bounded."""
    ok: bool
    blocking: bool = False
    """Whether a failure is one the model can fix (a test, a lint, a type or syntax error, a
    security finding)."""
    paths: tuple[str, ...] = ()
    checks: tuple[CheckOutcome, ...] = ()
    failures: tuple[VerifyFailure, ...] = ()
    report: str = ""
    """The compact text the model is shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangesReady:
    """The session's change is ready for review: every path it changed in its overlay."""

    type: Literal["changes_ready"] = "changes_ready"
    checkpoint_id: str
    """The newest checkpoint, which the change runs up to."""
    files: tuple[ChangedFile, ...] = ()
    flagged: tuple[str, ...] = ()
    """Changed paths the person should look at twice, each as `path: reason`."""
    summary: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangesApplied:
    """What became of the session's change: applied to the checkout, blocked, or discarded."""

    type: Literal["changes_applied"] = "changes_applied"
    outcome: ApplyOutcome
    checkpoint_id: str
    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()
    """Paths the person had changed too, whose edits were merged with the session's."""
    problems: tuple[str, ...] = ()
    """Why nothing was applied, each as `path: reason` (conflicts, refused paths, or what the
    security gate found)."""
    accepted_findings: tuple[str, ...] = ()
    """Security findings (`file:line: what`) the person accepted to have the change applied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointCreated:
    """The workspace's files were recorded; `rewind` can bring them back to this point."""

    type: Literal["checkpoint_created"] = "checkpoint_created"
    checkpoint_id: str
    label: str
    call_ids: tuple[str, ...] = ()
    """The tool calls whose changes this checkpoint records; empty for the baseline."""
    changes: tuple[ChangedFile, ...] = ()
    """What changed since the previous checkpoint (none listed for the baseline)."""
    more_changes: int = 0
    """How many further changed paths were left out of `changes` to keep the event small."""
    baseline: bool = False
    """The checkout as a new overlay of the session starts from it: its change counts from here."""
    tree: str = ""
    """The git tree id of the recorded files (equal trees: the very same files); may be empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rewound:
    """The files were restored to a checkpoint and the conversation continues from there.

    Events after `to_seq` (the checkpoint's own event) and before this one stay in the log but no
    longer count for the conversation; what they spent still counts for the budgets.
    """

    type: Literal["rewound"] = "rewound"
    checkpoint_id: str
    to_seq: int
