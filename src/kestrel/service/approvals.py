"""Permission questions answered through the log: wait for an answer, or give one.

A session's process logs each question (`approval_requested`) and waits; any process that can
write the log answers it (`approval_decided`): a second terminal, a server, an IDE. Questions of
a session's subagents are in their own logs and are answered the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from kestrel.agent.asking import answer_from_log
from kestrel.agent.asks import question_of
from kestrel.agent.ports import Approval
from kestrel.agent.state import replay
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    ApprovalScope,
    Record,
    SubagentStarted,
    ToolKind,
)
from kestrel.protocol.messages import ToolCall
from kestrel.store.base import EventStore


class NoSuchApproval(KestrelError):
    """No open permission question matches what was answered."""


@dataclass(slots=True)
class LogApprover:
    """Waits for the answer to a logged question, written by any process."""

    store: EventStore

    async def ask(
        self,
        call: ToolCall,
        kind: ToolKind,
        reason: str,
        *,
        repeatable: bool = True,
        question: Record | None = None,
    ) -> Approval:
        """The first `approval_decided` for this call after its question."""
        assert question is not None, "the tool runner logs the question before asking"
        return await wait_for_answer(self.store, question)


async def wait_for_answer(store: EventStore, question: Record) -> Approval:
    """Wait until someone answers the question `question` records."""
    call_id = question_of(question).call_id
    feed = store.subscribe(question.session_id, question.seq)
    try:
        async for record in feed:
            event = record.event
            if isinstance(event, ApprovalDecided) and event.call_id == call_id:
                return answer_from_log(record)
    finally:
        close = getattr(feed, "aclose", None)
        if close is not None:  # Stop its polling now rather than when it is collected.
            await close()
    raise KestrelError(f"the log of session {question.session_id} ended while waiting")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """An open permission question of a session or one of its subagents."""

    session_id: str
    """The log the question is in (a subagent's own session for its questions)."""
    seq: int
    question: ApprovalRequested


def pending_approvals(store: EventStore, session_id: str) -> list[PendingApproval]:
    """The questions of a session and its subagents that nobody has answered, oldest first."""
    found: list[PendingApproval] = []
    seen: set[str] = set()
    todo = [session_id]
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        records = store.read(current)
        state = replay(records)
        found.extend(
            PendingApproval(session_id=current, seq=r.seq, question=question_of(r))
            for r in state.asks.waiting()
        )
        todo.extend(
            r.event.child_session_id for r in records if isinstance(r.event, SubagentStarted)
        )
    return found


def answer_approval(
    store: EventStore,
    session_id: str,
    *,
    allow: bool,
    call_id: str | None = None,
    scope: ApprovalScope = "once",
    message: str = "",
    by: str,
) -> PendingApproval:
    """Answer an open question of the session (or its subagents); `call_id` picks one when
    several are open. Returns the question answered."""
    pending = pending_approvals(store, session_id)
    if call_id is not None:
        pending = [p for p in pending if p.question.call_id.startswith(call_id)]
    if not pending:
        which = f" for call {call_id}" if call_id else ""
        raise NoSuchApproval(f"session {session_id} has no open permission question{which}")
    if len(pending) > 1:
        listed = ", ".join(f"{p.question.call_id} ({p.question.name})" for p in pending)
        raise NoSuchApproval(
            f"session {session_id} has {len(pending)} open questions; name one: {listed}"
        )
    (chosen,) = pending
    store.append(
        chosen.session_id,
        ApprovalDecided(
            call_id=chosen.question.call_id,
            allow=allow,
            scope=scope if chosen.question.repeatable else "once",
            message=message,
            by=by,
        ),
    )
    return chosen
