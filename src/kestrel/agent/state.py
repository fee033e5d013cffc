"""Rebuild a session's state from its log: the conversation, the totals, what is unfinished.

This fold is the only way the loop knows where a session stands, whether it has just started or
is resumed after a crash, so a live run and a resumed one cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kestrel.agent.asks import Asks, fold_ask
from kestrel.agent.turn_marks import TurnMarks
from kestrel.protocol.events import (
    BudgetNotice,
    BudgetWarning,
    CheckpointCreated,
    ContextAdded,
    ContextCompacted,
    FileChanged,
    InjectionFlagged,
    Limits,
    LoopDetected,
    LoopRecovered,
    ModelCompleted,
    ModelRequestStarted,
    PermissionDecided,
    PermissionMode,
    PlanDecided,
    PlanProposed,
    PromptBlocked,
    Record,
    Rewound,
    SessionFinished,
    SessionResumed,
    SessionStarted,
    SubagentFinished,
    TodoItem,
    TodoUpdated,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
    Totals,
    UserMessage,
    VerificationFinished,
)
from kestrel.protocol.messages import Message, ToolCall, ToolResultTurn, Usage, UserTurn


@dataclass(frozen=True, slots=True)
class Mark:
    """The conversation as it stood when a checkpoint was recorded, for rewinding to it."""

    seq: int
    messages: tuple[Message, ...]
    pending: tuple[ToolCall, ...]
    calls: frozenset[str]
    """Ids of the calls requested by then; a rewind forgets the others."""
    finished: frozenset[str]
    """Ids of the calls that had a result by then."""


FIRST_CONTEXT_SOURCE = "context engine"
"""The `ContextAdded` source of a session's first context (`kestrel.agent.first_context`)."""


@dataclass(slots=True)
class SessionState:
    """Where a session stands after its log so far (built by `replay`, never by hand)."""

    session_id: str = ""
    task: str = ""
    first_context: bool = False
    """Whether the session's first context (the engine's files for the task) was added."""
    cwd: str = ""
    model: str = ""
    permission_mode: PermissionMode = "default"
    limits: Limits = field(default_factory=Limits)
    messages: list[Message] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    last_seq: int = 0
    finished: SessionFinished | None = None
    pending: list[ToolCall] = field(default_factory=list)
    """The last assistant turn's calls, in the model's order, until every one has a result."""
    calls: dict[str, ToolCall] = field(default_factory=dict)
    """Every tool call requested so far, by id."""
    changing: set[str] = field(default_factory=set)
    """Ids of the calls logged as able to change files (not read-only when requested)."""
    started: set[str] = field(default_factory=set)
    results: dict[str, ToolFinished] = field(default_factory=dict)
    decisions: dict[str, PermissionDecided] = field(default_factory=dict)
    writes: dict[str, list[FileChanged]] = field(default_factory=dict)
    """Announced file writes per call id, for reconciling interrupted calls on resume."""
    warned_budgets: set[str] = field(default_factory=set)
    noted_budgets: set[str] = field(default_factory=set)
    """Budgets a `budget_notice` was given for (each is said once per session)."""
    notes: list[str] = field(default_factory=list)
    """Kestrel's notes to the model (loop and budget warnings) waiting for a tool result."""
    checkpoints: dict[str, Mark] = field(default_factory=dict)
    flagged: bool = False
    """A tool result held instructions aimed at the agent: commands no rule allows are asked."""
    unanswered_prompt: str | None = None
    """The person's latest message, until a model request answers it (for prompt hooks)."""
    unverified: set[str] = field(default_factory=set)
    """Paths changed since the last verification."""
    failed_verifications: int = 0
    """Verifications that failed in a row since the person last wrote."""
    todos: tuple[TodoItem, ...] = ()
    """The task list as last written (by the model's `todo` calls or an approved plan)."""
    plan: PlanProposed | None = None
    """The latest proposed plan while it waits for the person's decision."""
    marks: TurnMarks = field(default_factory=TurnMarks)
    asks: Asks = field(default_factory=Asks)
    """Open permission questions, answers, and a stop asked for from any process."""
    """Recent requests' conversations, for going back to before a loop."""
    segment_start: float | None = None
    wall_before_segment: float = 0.0
    last_at: float = 0.0

    @property
    def unfinished(self) -> list[ToolCall]:
        """Calls of the last assistant turn that have no result yet."""
        return [c for c in self.pending if c.id not in self.results]


def replay(records: Iterable[Record]) -> SessionState:
    """Fold records, in order, into a `SessionState`."""
    state = SessionState()
    for record in records:
        apply(state, record)
    return state


def apply(state: SessionState, record: Record) -> None:
    """Fold one more record into `state`."""
    event = record.event
    # Answers written by another process are folded when they are read, maybe after later events.
    state.last_seq = max(state.last_seq, record.seq)
    fold_ask(state.asks, record)
    _track_wall_time(state, record)
    state.marks.observe(record, state.messages, state.calls, state.results)
    match event:
        case SessionStarted():
            state.session_id = event.session_id
            state.task, state.cwd, state.model = event.task, event.cwd, event.model
            state.permission_mode, state.limits = event.permission_mode, event.limits
        case UserMessage():
            _flush_pending(state, force=True)
            notes, state.notes = state.notes, []
            state.messages.append(UserTurn(text="\n\n".join([*notes, event.text])))
            state.finished = None
            state.unanswered_prompt = event.text
            state.failed_verifications = 0
        case ModelRequestStarted():
            state.unanswered_prompt = None
        case PromptBlocked():
            if state.messages and isinstance(state.messages[-1], UserTurn):
                state.messages.pop()
            state.unanswered_prompt = None
        case ContextAdded():
            _add_context(state, f"[{event.source}] {event.text}")
            state.first_context |= event.source == FIRST_CONTEXT_SOURCE
            if event.usage is not None:  # spent, but not a turn of the session
                state.totals = _add_usage(state.totals, event.usage, turns=0)
        case InjectionFlagged():
            state.flagged = True
        case VerificationFinished():
            # A change that failed its checks stays unchecked until checks pass: a reply that
            # only says it is done must not finish (and be applied) without another check.
            state.unverified = set(event.paths) if event.blocking and not event.ok else set()
            state.failed_verifications = 0 if event.ok else state.failed_verifications + 1
        case CheckpointCreated():
            state.unverified.update(change.path for change in event.changes)
            state.checkpoints[event.checkpoint_id] = Mark(
                seq=record.seq,
                messages=tuple(state.messages),
                pending=tuple(state.pending),
                calls=frozenset(state.calls),
                finished=frozenset(state.results),
            )
        case Rewound():
            _rewind(state, event)
        case LoopRecovered():
            _recover(state, event)
        case ContextCompacted():
            _compact(state, event)
        case ModelCompleted():
            _flush_pending(state, force=True)
            state.messages.append(event.message)
            state.pending = list(event.message.tool_calls)
            state.totals = _add_usage(state.totals, event.usage)
        case ToolCallRequested():
            state.calls[event.call.id] = event.call
            if not event.read_only:
                state.changing.add(event.call.id)
            state.totals = replace(state.totals, tool_calls=state.totals.tool_calls + 1)
        case ToolStarted():
            state.started.add(event.call_id)
        case PermissionDecided():
            state.decisions[event.call_id] = event
        case FileChanged():
            state.writes.setdefault(event.call_id, []).append(event)
            state.unverified.add(event.path)
        case ToolFinished():
            state.results[event.call_id] = event
            _flush_pending(state)
        case LoopDetected(action="warn"):
            _attach_note(state, f"[kestrel] Loop warning: {event.detail}")
        case BudgetWarning():
            state.warned_budgets.add(event.budget)
            _attach_note(
                state,
                f"[kestrel] Budget warning: {event.budget} at {event.used:g} of {event.limit:g}.",
            )
        case BudgetNotice():
            state.noted_budgets.add(event.budget)
        case TodoUpdated():
            state.todos = event.items
        case PlanProposed():
            state.plan = event
        case PlanDecided():
            state.plan = None
            if event.decision == "approved" and event.permission_mode is not None:
                state.permission_mode = event.permission_mode
        case SubagentFinished():
            state.totals = with_subagent(state.totals, event.totals)
        case SessionResumed():
            state.finished = None
        case SessionFinished():
            state.finished = event
    state.totals = replace(state.totals, wall_s=wall_seconds(state, record.at))


def _rewind(state: SessionState, event: Rewound) -> None:
    """Go back to the conversation of a checkpoint; calls it had not run yet are answered."""
    mark = state.checkpoints[event.checkpoint_id]
    _forget_after(state, mark.calls, mark.finished)
    state.messages = list(mark.messages)
    state.messages.extend(
        ToolResultTurn(
            call_id=c.id,
            name=c.name,
            content="[kestrel] Not run: the files were rewound to before this call.",
            is_error=True,
        )
        for c in mark.pending
    )
    state.pending, state.notes, state.finished = [], [], None
    _attach_note(
        state,
        f"[kestrel] The person rewound the files to checkpoint {event.checkpoint_id[:12]}: "
        "every change after this point was undone.",
    )


def _forget_after(state: SessionState, calls: frozenset[str], finished: frozenset[str]) -> None:
    """Forget the calls made after a point: for the conversation they never happened."""
    # A model may even reuse their ids.
    state.calls = {k: v for k, v in state.calls.items() if k in calls}
    state.results = {k: v for k, v in state.results.items() if k in finished}
    state.decisions = {k: v for k, v in state.decisions.items() if k in finished}
    state.writes = {k: v for k, v in state.writes.items() if k in finished}
    state.started &= finished


def _recover(state: SessionState, event: LoopRecovered) -> None:
    """Go back to the conversation a request was sent before a loop began, and add the note."""
    mark = state.marks.before[event.to_seq]
    _forget_after(state, mark.calls, mark.finished)
    state.messages = list(mark.messages)
    state.pending, state.notes, state.finished = [], [], None
    state.marks.recoveries += 1
    if event.checkpoint_id is not None:
        state.marks.files = event.checkpoint_id
    _add_context(state, event.note)


def wall_seconds(state: SessionState, now: float) -> float:
    """Active time: the sum of each run's span, so time between a crash and resume is free."""
    if state.segment_start is None:
        return state.wall_before_segment
    return state.wall_before_segment + max(0.0, now - state.segment_start)


def _track_wall_time(state: SessionState, record: Record) -> None:
    if isinstance(record.event, SessionStarted | SessionResumed):
        if state.segment_start is not None:
            state.wall_before_segment += max(0.0, state.last_at - state.segment_start)
        state.segment_start = record.at
    state.last_at = record.at


def _flush_pending(state: SessionState, *, force: bool = False) -> None:
    """Append results of the last assistant turn, in call order, with any notes attached.

    With `force`, a call that never got a result (the log moved on without one) is answered as
    interrupted, so the conversation a provider sees is always well formed.
    """
    if not state.pending or not (force or all(c.id in state.results for c in state.pending)):
        return
    for c in state.pending:
        result = state.results.get(c.id)
        content = result.content if result else "[kestrel] Interrupted: this call has no result."
        state.messages.append(
            ToolResultTurn(
                call_id=c.id,
                name=c.name,
                content=content,
                is_error=result is None or result.is_error,
            )
        )
    state.pending = []
    notes, state.notes = state.notes, []
    for note in notes:
        _attach_note(state, note)


def _attach_note(state: SessionState, note: str) -> None:
    """Append Kestrel's note to the latest tool result, where the model reads it next."""
    last = state.messages[-1] if state.messages else None
    if isinstance(last, ToolResultTurn) and not state.pending:
        state.messages[-1] = replace(last, content=f"{last.content}\n\n{note}")
    elif note not in state.notes:
        state.notes.append(note)


def _add_context(state: SessionState, text: str) -> None:
    """Text for the model outside a tool result: joins the person's latest message, or starts
    a new message when the model spoke last."""
    last = state.messages[-1] if state.messages else None
    if state.pending or isinstance(last, ToolResultTurn):
        _attach_note(state, text)
    elif isinstance(last, UserTurn):
        state.messages[-1] = replace(last, text=f"{last.text}\n\n{text}")
    else:
        state.messages.append(UserTurn(text=text))


def _compact(state: SessionState, event: ContextCompacted) -> None:
    """The compacted turn, then the newest `kept` messages (large outputs moved to files)."""
    kept = state.messages[len(state.messages) - event.kept :] if event.kept else []
    moved = {item.call_id: item.content for item in event.moved}
    kept = [
        replace(m, content=moved[m.call_id])
        if isinstance(m, ToolResultTurn) and m.call_id in moved
        else m
        for m in kept
    ]
    state.messages = [UserTurn(text=event.message), *kept]
    if event.usage is not None:  # the summarising call: spent, but not a turn of the session
        state.totals = _add_usage(state.totals, event.usage, turns=0)


def _add_usage(totals: Totals, usage: Usage, *, turns: int = 1) -> Totals:
    return replace(
        totals,
        turns=totals.turns + turns,
        input_tokens=totals.input_tokens + usage.input_tokens,
        output_tokens=totals.output_tokens + usage.output_tokens,
        cache_write_tokens=totals.cache_write_tokens + usage.cache_write_tokens,
        cache_read_tokens=totals.cache_read_tokens + usage.cache_read_tokens,
        cost_usd=totals.cost_usd + usage.cost_usd,
        tokens_estimated=totals.tokens_estimated or not usage.tokens_reported,
        cost_known=totals.cost_known and usage.priced,
    )


def with_subagent(totals: Totals, spent: Totals) -> Totals:
    """The parent's totals with a subagent's spend added: its turns, tool calls, tokens and
    cost count toward the parent's budgets. Its wall time does not: it ran inside the parent's.
    """
    return replace(
        totals,
        turns=totals.turns + spent.turns,
        tool_calls=totals.tool_calls + spent.tool_calls,
        input_tokens=totals.input_tokens + spent.input_tokens,
        output_tokens=totals.output_tokens + spent.output_tokens,
        cache_write_tokens=totals.cache_write_tokens + spent.cache_write_tokens,
        cache_read_tokens=totals.cache_read_tokens + spent.cache_read_tokens,
        cost_usd=totals.cost_usd + spent.cost_usd,
        tokens_estimated=totals.tokens_estimated or spent.tokens_estimated,
        cost_known=totals.cost_known and spent.cost_known,
    )
