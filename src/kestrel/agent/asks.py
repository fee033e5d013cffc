"""What a session waits on a person for, folded from its log: open permission questions, answers
that came before anyone waited for them, tools allowed for the whole session, a stop asked for.

Questions and answers are events, so any process that writes the log can answer: the terminal
running the session, a second terminal (`kestrel approve`), a server, an IDE.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    PermissionDecided,
    Record,
    SessionFinished,
    SessionResumed,
    ToolFinished,
)


@dataclass(slots=True)
class Asks:
    """The open questions of a session, and the answers that still apply."""

    open: dict[str, Record] = field(default_factory=dict)
    """The `approval_requested` records of questions not yet settled, by call id."""
    answers: dict[str, ApprovalDecided] = field(default_factory=dict)
    """Answers not yet acted on (given while the session's process was down, say), by call id."""
    always: set[str] = field(default_factory=set)
    """Tools a person allowed for the rest of the session."""
    cancel: CancelRequested | None = None
    """A stop asked for while the session runs; cleared when it finishes."""

    def waiting(self) -> list[Record]:
        """The `approval_requested` records nobody has answered yet, oldest first."""
        return [q for call_id, q in self.open.items() if call_id not in self.answers]


def question_of(record: Record) -> ApprovalRequested:
    """The question a record of `Asks.open` holds."""
    assert isinstance(record.event, ApprovalRequested)
    return record.event


def fold_ask(asks: Asks, record: Record) -> None:
    """Fold one record into `asks` (events of other kinds are ignored)."""
    event = record.event
    match event:
        case ApprovalRequested():
            asks.open[event.call_id] = record
            asks.answers.pop(event.call_id, None)
        case ApprovalDecided():
            asked = asks.open.get(event.call_id)
            if asked is None or event.call_id in asks.answers:
                return  # Not asked, or answered already: the first answer stands.
            asks.answers[event.call_id] = event
            if event.allow and event.scope == "session" and question_of(asked).repeatable:
                asks.always.add(question_of(asked).name)
        case PermissionDecided() | ToolFinished():
            # Settled: decided, or ended without a decision (a stop while it was asked).
            asks.open.pop(event.call_id, None)
            asks.answers.pop(event.call_id, None)
        case CancelRequested():
            asks.cancel = event
        case SessionFinished() | SessionResumed():
            asks.cancel = None
