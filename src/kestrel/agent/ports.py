"""What the loop asks of the world, as interfaces: a model stream, a person to ask, a workspace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from kestrel.protocol.errors import ProviderError
from kestrel.protocol.events import (
    ApprovalScope,
    ChangedFile,
    ModelRole,
    Record,
    ToolKind,
    VerificationFinished,
)
from kestrel.protocol.messages import ModelRequest, StreamPart, ToolCall
from kestrel.sandbox.base import Executor
from kestrel.store.base import Spend

OnRetry = Callable[[int, float, ProviderError], None]
"""Told of each retry: attempt number, delay before it in seconds, and the error."""

OnSwitch = Callable[[str, str, ProviderError], None]
"""Told of each failover: the model that failed, the model tried next, and the error."""


class ModelStreamer(Protocol):
    """Streams one model reply from the models of a role, retrying and failing over."""

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        """Stream the reply; report each retry and each move to another model as it happens."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """The person's answer to a permission question."""

    allow: bool
    decided_by: Literal["user", "headless"]
    reason: str = ""
    scope: ApprovalScope = "once"
    by: str = "terminal"
    """Who answered, for the log (`approval_decided`)."""
    logged: Record | None = None
    """The `approval_decided` record when the answer was written to the log by someone else."""


class Approver(Protocol):
    """Asks the person whether a tool call may run."""

    async def ask(
        self,
        call: ToolCall,
        kind: ToolKind,
        reason: str,
        *,
        repeatable: bool = True,
        question: Record | None = None,
    ) -> Approval:
        """Return the person's answer; a frontend with nobody to ask denies.

        `repeatable` is False for questions that must be asked every time (a dangerous action):
        an "always allow" answered earlier must not cover them. `question` is the logged
        `approval_requested` record, which an answer from another process refers to.
        """
        ...


class DenyingApprover:
    """For headless runs: a question nobody can answer is a denial the model is told about."""

    async def ask(
        self,
        call: ToolCall,
        kind: ToolKind,
        reason: str,
        *,
        repeatable: bool = True,
        question: Record | None = None,
    ) -> Approval:
        """Deny, saying that no one was there to ask."""
        return Approval(
            allow=False,
            decided_by="headless",
            reason=f"{reason}; running headless, so nobody could approve it "
            "(allow it with --permission-mode, or run interactively)",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEnvironment:
    """Where tools run: the workspace, the command executor and the output limits."""

    root: Path
    executor: Executor
    artifacts_dir: Path
    bash_timeout_s: float = 120.0
    max_output_chars: int = 30_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """A recorded state of the workspace and what changed since the previous one."""

    checkpoint_id: str
    changes: tuple[ChangedFile, ...]
    tree: str = ""
    """An id of the files' content: two snapshots of the same files have the same tree."""


class Checkpointer(Protocol):
    """Records the workspace's files so a session can be rewound to any recorded point."""

    async def snapshot(self, label: str) -> Snapshot | None:
        """Record the files now; `None` when nothing changed since the last record."""
        ...

    async def restore(self, checkpoint_id: str) -> None:
        """Make the workspace's files exactly what they were at `checkpoint_id`."""
        ...


class Verifier(Protocol):
    """Checks the changed files (syntax, the project's linters, related tests)."""

    async def verify(self, paths: Sequence[str]) -> VerificationFinished:
        """The verification's outcome for `paths`; the loop numbers its round."""
        ...


class SpendMeter(Protocol):
    """What model calls cost across every session, for budgets that span sessions."""

    def spent_since(self, since: float) -> Spend:
        """Every session's spend on model calls recorded at or after `since` (epoch seconds)."""
        ...
