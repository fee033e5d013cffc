"""The events of a session's log: frozen, tagged by `type`, with a versioned JSON form.

The log is the single source of truth. Frontends render it, resume replays it, evaluations score
it. Events carry no sequence number of their own: the store wraps each in a `Record` when it has
made it durable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from kestrel.protocol.messages import AssistantTurn, JSONValue, StopReason, ToolCall, Usage

SCHEMA_VERSION = 1

PermissionMode = Literal["default", "accept-edits", "plan", "bypass"]
FinishReason = Literal["done", "error", "budget", "loop", "cancelled", "hook", "unverified", "plan"]
BudgetKind = Literal["turns", "tokens", "cost", "wall_time", "cost_per_day", "tokens_per_day"]
"""The `_per_day` budgets count every session's spend since local midnight."""
LoopPattern = Literal["repeat", "alternate", "oscillate"]
"""`repeat`: one call and result again and again; `alternate`: two calls taking turns;
`oscillate`: failing results alternating between two states, whatever calls lie between."""
ToolKind = Literal["read", "edit", "execute"]
"""Reads change nothing; edits write files in the workspace; executes run commands."""
ModelRole = Literal["main", "plan", "fast", "edit"]
"""What a model call is for; settings map each role to an ordered list of models."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Budgets for one session; `None` means unlimited."""

    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """What a session has spent so far."""

    turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    tokens_estimated: bool = False
    """True when some call's server reported no usage, so the token counts hold estimates."""
    cost_known: bool = True
    """False when some call's model has no price, so `cost_usd` is only a lower bound."""

    @property
    def tokens(self) -> int:
        """Input (cached or not) plus output tokens."""
        return (
            self.input_tokens
            + self.cache_write_tokens
            + self.cache_read_tokens
            + self.output_tokens
        )

    @property
    def total_input_tokens(self) -> int:
        """Every input token, whether read from the prompt cache, written to it, or neither."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def cache_read_share(self) -> float | None:
        """The share of input tokens read from the prompt cache; None before any input."""
        total = self.total_input_tokens
        return self.cache_read_tokens / total if total else None


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
class ModelRequestStarted:
    """A call to the model began."""

    type: Literal["model_request_started"] = "model_request_started"
    request_id: str
    model: str
    turn: int
    role: ModelRole = "main"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTextDelta:
    """A piece of the model's text."""

    type: Literal["model_text_delta"] = "model_text_delta"
    request_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelToolCallDelta:
    """A piece of a tool call the model is writing."""

    type: Literal["model_tool_call_delta"] = "model_tool_call_delta"
    request_id: str
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetrying:
    """A model call failed in a way worth retrying; the next attempt waits `delay_s`."""

    type: Literal["model_retrying"] = "model_retrying"
    request_id: str
    attempt: int
    delay_s: float
    error_kind: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSwitched:
    """A model call failed over: the same request goes to the next model of its role."""

    type: Literal["model_switched"] = "model_switched"
    request_id: str
    role: ModelRole
    from_model: str
    to_model: str
    error_kind: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCompleted:
    """A model call finished: the whole reply and what it cost."""

    type: Literal["model_completed"] = "model_completed"
    request_id: str
    message: AssistantTurn
    usage: Usage
    stop_reason: StopReason = "end_turn"


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
class ChangedFile:
    """One path that differs from the previous checkpoint: added, modified, deleted or renamed."""

    path: str
    status: Literal["A", "M", "D", "R"]
    old_path: str | None = None


ApplyOutcome = Literal["applied", "conflicts", "refused", "discarded"]
CheckStatus = Literal["passed", "failed", "error", "skipped", "timed_out"]
FailureKind = Literal["test", "lint", "type", "syntax", "build", "error"]


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
    """Whether a failure is one the model can fix (a test, a lint, a type or syntax error)."""
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
    """Why nothing was applied, each as `path: reason` (conflicts or refused paths)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetWarning:
    """A budget passed its warning threshold."""

    type: Literal["budget_warning"] = "budget_warning"
    budget: BudgetKind
    used: float
    limit: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetNotice:
    """A budget cannot be enforced as set (no price is known), or counts estimated tokens."""

    type: Literal["budget_notice"] = "budget_notice"
    budget: BudgetKind
    enforced: bool
    """False when the budget cannot stop the session at all (its spend is unknown)."""
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDetected:
    """The model repeats itself; the first time it is warned, then the session stops."""

    type: Literal["loop_detected"] = "loop_detected"
    pattern: LoopPattern
    action: Literal["warn", "stop"]
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopRecovered:
    """A loop was caught and broken once: the conversation went back to before it began.

    The files went back too where a checkpoint recorded them. The turns after `to_seq` stay in
    the log but no longer count for the conversation; what they spent still counts for the
    budgets. If the loop comes back, the session stops with reason `loop`.
    """

    type: Literal["loop_recovered"] = "loop_recovered"
    pattern: LoopPattern
    detail: str
    """What was detected, in a sentence for the person."""
    to_seq: int
    """The `model_request_started` event the conversation went back to (that turn is redone)."""
    checkpoint_id: str | None = None
    """The checkpoint the files were restored to; None when the files were left as they were."""
    note: str
    """What the model is told, after the rewound conversation, asking for another approach."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HookRan:
    """A configured hook command ran (or failed to), and what it said."""

    type: Literal["hook_ran"] = "hook_ran"
    hook_event: str
    command: str
    outcome: Literal["ok", "block", "error", "timeout", "crash"]
    exit_code: int | None = None
    duration_ms: float = 0.0
    call_id: str | None = None
    message: str = ""
    """What the hook wrote to stderr (or its reason), trimmed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MovedOutput:
    """A large tool output in a kept turn, replaced by a reference to the file holding it."""

    call_id: str
    path: str
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted:
    """Older turns were folded into one message so the conversation fits the context window.

    From here on the conversation is `message` followed by the newest `kept` messages. The log
    still holds every dropped turn; rewinding to a checkpoint taken before this event restores
    the conversation as it was.
    """

    type: Literal["context_compacted"] = "context_compacted"
    message: str
    kept: int
    dropped: int
    transcript: str
    moved: tuple[MovedOutput, ...] = ()
    tokens_before: int
    tokens_after: int
    window_tokens: int
    usage: Usage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextAdded:
    """Text added to the conversation by Kestrel on the person's behalf, e.g. a hook's output."""

    type: Literal["context_added"] = "context_added"
    source: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptBlocked:
    """A UserPromptSubmit hook refused the person's latest message; the model never sees it."""

    type: Literal["prompt_blocked"] = "prompt_blocked"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InjectionFlagged:
    """A tool result holds text that reads like instructions to the agent.

    The result is framed as data for the model, and until the session ends, commands that no
    rule allows explicitly are asked about.
    """

    type: Literal["injection_flagged"] = "injection_flagged"
    call_id: str
    name: str
    findings: tuple[str, ...]
    """One line per finding: the kind of instruction and the offending text, trimmed."""


TodoStatus = Literal["pending", "in_progress", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TodoItem:
    """One entry of the session's task list."""

    id: str
    text: str
    status: TodoStatus = "pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class TodoUpdated:
    """The session's task list, whole, as the model or an approved plan last wrote it."""

    type: Literal["todo_updated"] = "todo_updated"
    items: tuple[TodoItem, ...] = ()
    source: Literal["model", "plan"] = "model"
    call_id: str | None = None
    """The `todo` call that wrote the list; None when an approved plan did."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    """One step of a proposed plan: what to do, where, how to check it, and what comes first."""

    id: str
    title: str
    files: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanProposed:
    """The model proposed a plan; nothing is written until the person approves it."""

    type: Literal["plan_proposed"] = "plan_proposed"
    plan_id: str
    summary: str = ""
    steps: tuple[PlanStep, ...] = ()
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanDecided:
    """The person approved (perhaps after editing) or rejected a proposed plan."""

    type: Literal["plan_decided"] = "plan_decided"
    plan_id: str
    decision: Literal["approved", "rejected"]
    steps: tuple[PlanStep, ...] = ()
    """The steps approved, as edited; empty for a rejection."""
    edited: bool = False
    reason: str = ""
    permission_mode: PermissionMode | None = None
    """The mode the session continues in after an approval."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted:
    """A `task` call started a subagent: a child session in the same store, with its own log."""

    type: Literal["subagent_started"] = "subagent_started"
    call_id: str
    child_session_id: str
    agent: str
    description: str = ""
    model: str = ""
    role: ModelRole | None = None
    """The role whose models answer the subagent; None when its definition names a model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFinished:
    """A subagent's session stopped; its spend counts toward the parent's totals and budgets."""

    type: Literal["subagent_finished"] = "subagent_finished"
    call_id: str
    child_session_id: str
    agent: str
    reason: FinishReason
    detail: str = ""
    totals: Totals = field(default_factory=Totals)


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
    | ErrorOccurred
    | SessionFinished,
    Field(discriminator="type"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """An event made durable: its session, its place in the log, and when it was written."""

    session_id: str
    seq: int
    at: float
    event: Event


__all__ = [
    "SCHEMA_VERSION",
    "ApplyOutcome",
    "BudgetKind",
    "BudgetNotice",
    "BudgetWarning",
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
]
