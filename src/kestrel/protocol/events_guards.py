"""Events of the guards around the loop: budgets, loops, hooks, context, injections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.protocol.events_base import (
    BudgetKind,
    LoopPattern,
)
from kestrel.protocol.messages import Usage


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
    usage: Usage | None = None
    """What a model call made for it spent (the first context's reranking), if one did."""


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
