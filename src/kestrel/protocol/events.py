"""The events of a session's log: frozen, tagged by `type`, with a versioned JSON form.

The log is the single source of truth. Frontends render it, resume replays it, evaluations score
it. Events carry no sequence number of their own: the store wraps each in a `Record` when it has
made it durable.

This module holds the session and tool events and the `Event` union, and names every event;
the shared types live in `events_base`, and the families in modules of their own:
`events_model` (a model call's progress and reply), `events_workspace` (checkpoints,
verification, the change), `events_guards` (budgets, loops, hooks, context), `events_work`
(task list, plans, subagents), `events_asks` (what waits on a person) and `events_delivery`
(pull requests). Import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from kestrel.protocol.events_asks import (
    ApprovalDecided,
    ApprovalRequested,
    ApprovalScope,
    CancelRequested,
)
from kestrel.protocol.events_base import (
    SCHEMA_VERSION,
    BudgetKind,
    FinishReason,
    Limits,
    LoopPattern,
    ModelRole,
    PermissionMode,
    ToolKind,
    Totals,
)
from kestrel.protocol.events_delivery import PullRequestOpened, PullRequestSynced
from kestrel.protocol.events_guards import (
    BudgetNotice,
    BudgetWarning,
    ContextAdded,
    ContextCompacted,
    HookRan,
    InjectionFlagged,
    LoopDetected,
    LoopRecovered,
    MovedOutput,
    PromptBlocked,
)
from kestrel.protocol.events_model import (
    ModelCompleted,
    ModelRequestStarted,
    ModelRetrying,
    ModelSwitched,
    ModelTextDelta,
    ModelToolCallDelta,
)
from kestrel.protocol.events_work import (
    PlanDecided,
    PlanProposed,
    PlanStep,
    SubagentFinished,
    SubagentStarted,
    TodoItem,
    TodoStatus,
    TodoUpdated,
)
from kestrel.protocol.events_workspace import (
    ApplyOutcome,
    ChangedFile,
    ChangesApplied,
    ChangesReady,
    CheckOutcome,
    CheckpointCreated,
    CheckStatus,
    FailureKind,
    Rewound,
    VerificationFinished,
    VerifyFailure,
)
from kestrel.protocol.messages import JSONValue, ToolCall, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted:
    """First event of every session; carries what a resume needs to rebuild it."""

    type: Literal["session_started"] = "session_started"
    session_id: str
    task: str
    cwd: str
    model: str
    permission_mode: PermissionMode = "default"
    limits: Limits = field(default_factory=Limits)
    kestrel_version: str = ""
    parent_session_id: str | None = None
    """For a subagent's session: the session whose `task` call started it; None otherwise."""
    parent_call_id: str | None = None
    """For a subagent's session: the id of that `task` call in the parent's log."""
    workspace: Literal["overlay", "direct", ""] = ""
    """Where the session's changes go: an overlay of the checkout, or the checkout itself;
    empty in logs written before it was recorded. A resume keeps it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionResumed:
    """A process picked the session up again from its log."""

    type: Literal["session_resumed"] = "session_resumed"
    from_seq: int
    interrupted_calls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """Text from the person: the task, or a follow-up."""

    type: Literal["user_message"] = "user_message"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequested:
    """The model asked for a tool call."""

    type: Literal["tool_call_requested"] = "tool_call_requested"
    call: ToolCall
    read_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecided:
    """Whether a tool call may run, who decided, and why."""

    type: Literal["permission_decided"] = "permission_decided"
    call_id: str
    decision: Literal["allow", "deny"]
    decided_by: Literal["mode", "rule", "user", "headless", "hook", "classifier"]
    reason: str = ""
    source: str = ""
    """The rule (and the settings file it came from) or the hook command that decided."""
    asked: str = ""
    """When the person was asked (or nobody could be): why Kestrel asked."""
    updated_arguments: str | None = None
    """A hook's replacement for the call's arguments (JSON text); the call runs with these."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted:
    """A tool call began running."""

    type: Literal["tool_started"] = "tool_started"
    call_id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutputChunk:
    """Output a running tool produced, as it came."""

    type: Literal["tool_output_chunk"] = "tool_output_chunk"
    call_id: str
    stream: Literal["stdout", "stderr"] = "stdout"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    """A tool call ended; `content` is exactly what the model sees."""

    type: Literal["tool_finished"] = "tool_finished"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    exit_code: int | None = None
    duration_ms: float = 0.0
    truncated: bool = False
    full_output_path: str | None = None
    interrupted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChanged:
    """A tool is about to write (or has written) a file; logged before the write lands."""

    type: Literal["file_changed"] = "file_changed"
    call_id: str
    path: str
    before_hash: str | None
    after_hash: str | None
    diff: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorOccurred:
    """Something failed; `recoverable` says whether the session goes on."""

    type: Literal["error"] = "error"
    error_kind: str
    message: str
    recoverable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFinished:
    """The session stopped: why, and what it spent."""

    type: Literal["session_finished"] = "session_finished"
    reason: FinishReason
    detail: str = ""
    final_text: str = ""
    totals: Totals = field(default_factory=Totals)
    day_cost_usd: float | None = None
    """Every session's spend since local midnight, in US dollars; None without a daily budget."""
    day_tokens: int | None = None
    """Every session's tokens since local midnight; None without a daily budget."""


Event = Annotated[
    SessionStarted
    | SessionResumed
    | UserMessage
    | ModelRequestStarted
    | ModelTextDelta
    | ModelToolCallDelta
    | ModelRetrying
    | ModelSwitched
    | ModelCompleted
    | ToolCallRequested
    | PermissionDecided
    | ApprovalRequested
    | ApprovalDecided
    | CancelRequested
    | ToolStarted
    | ToolOutputChunk
    | ToolFinished
    | FileChanged
    | CheckpointCreated
    | Rewound
    | ChangesReady
    | VerificationFinished
    | ChangesApplied
    | BudgetWarning
    | BudgetNotice
    | LoopDetected
    | LoopRecovered
    | HookRan
    | ContextAdded
    | ContextCompacted
    | PromptBlocked
    | InjectionFlagged
    | TodoUpdated
    | PlanProposed
    | PlanDecided
    | SubagentStarted
    | SubagentFinished
    | PullRequestOpened
    | PullRequestSynced
    | ErrorOccurred
    | SessionFinished,
    Field(discriminator="type"),
]


SPENDING_TYPES = ("model_completed", "context_compacted", "context_added")
"""The events that can carry a model call's usage: the session's turns, and the calls made to
summarise the conversation and to rerank the first context."""


def spent_by(event: Event) -> Usage | None:
    """What the model call behind `event` spent; None for an event no call made."""
    if isinstance(event, ModelCompleted | ContextCompacted | ContextAdded):
        return event.usage
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """An event made durable: its session, its place in the log, and when it was written."""

    session_id: str
    seq: int
    at: float
    event: Event


__all__ = [
    "SCHEMA_VERSION",
    "SPENDING_TYPES",
    "ApplyOutcome",
    "ApprovalDecided",
    "ApprovalRequested",
    "ApprovalScope",
    "BudgetKind",
    "BudgetNotice",
    "BudgetWarning",
    "CancelRequested",
    "ChangedFile",
    "ChangesApplied",
    "ChangesReady",
    "CheckOutcome",
    "CheckStatus",
    "CheckpointCreated",
    "ContextAdded",
    "ContextCompacted",
    "ErrorOccurred",
    "Event",
    "FailureKind",
    "FileChanged",
    "FinishReason",
    "HookRan",
    "InjectionFlagged",
    "JSONValue",
    "Limits",
    "LoopDetected",
    "LoopPattern",
    "LoopRecovered",
    "ModelCompleted",
    "ModelRequestStarted",
    "ModelRetrying",
    "ModelRole",
    "ModelSwitched",
    "ModelTextDelta",
    "ModelToolCallDelta",
    "MovedOutput",
    "PermissionDecided",
    "PermissionMode",
    "PlanDecided",
    "PlanProposed",
    "PlanStep",
    "PromptBlocked",
    "PullRequestOpened",
    "PullRequestSynced",
    "Record",
    "Rewound",
    "SessionFinished",
    "SessionResumed",
    "SessionStarted",
    "SubagentFinished",
    "SubagentStarted",
    "TodoItem",
    "TodoStatus",
    "TodoUpdated",
    "ToolCallRequested",
    "ToolFinished",
    "ToolKind",
    "ToolOutputChunk",
    "ToolStarted",
    "Totals",
    "UserMessage",
    "VerificationFinished",
    "VerifyFailure",
    "spent_by",
]
