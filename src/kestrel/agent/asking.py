"""Ask a person whether a tool call may run, with the question and its answer in the log.

The question is logged before anyone is asked, so a second terminal, a server or an IDE sees it
and may answer; the approver waits for whichever answer comes first. An answer given while no
process ran the session (after a crash, say) is used on resume without asking again.
"""

from __future__ import annotations

from collections.abc import Callable

from kestrel.agent.ports import Approval, Approver
from kestrel.agent.state import SessionState, apply
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    Record,
    ToolKind,
)
from kestrel.protocol.messages import ToolCall


async def ask_person(
    emit: Callable[[Event], Record],
    state: SessionState,
    approver: Approver,
    call: ToolCall,
    kind: ToolKind,
    reason: str,
    *,
    repeatable: bool,
) -> Approval:
    """The answer to "may `call` run?": from an earlier "for this session", an answer already
    in the log, or the approver; a new answer is logged."""
    asks = state.asks
    if repeatable and call.name in asks.always:
        return Approval(
            allow=True, decided_by="user", reason=f"{call.name} allowed for this session"
        )
    earlier = asks.answers.get(call.id)
    if earlier is not None:  # Answered while nobody waited: the answer stands.
        return _from_log(earlier, None)
    question = asks.open.get(call.id)
    if question is None:
        question = emit(
            ApprovalRequested(
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                kind=kind,
                reason=reason,
                repeatable=repeatable,
            )
        )
    answer = await approver.ask(call, kind, reason, repeatable=repeatable, question=question)
    if answer.logged is not None:
        apply(state, answer.logged)
    elif answer.decided_by == "user":
        emit(
            ApprovalDecided(
                call_id=call.id,
                allow=answer.allow,
                scope=answer.scope if repeatable else "once",
                message=answer.reason,
                by=answer.by,
            )
        )
    return answer


def _from_log(decided: ApprovalDecided, record: Record | None) -> Approval:
    """An answer as the log holds it."""
    who = decided.by or "a person"
    default = f"allowed by {who}" if decided.allow else f"denied by {who}"
    return Approval(
        allow=decided.allow,
        decided_by="user",
        reason=decided.message or default,
        scope=decided.scope,
        by=decided.by,
        logged=record,
    )


def answer_from_log(record: Record) -> Approval:
    """The approval an `approval_decided` record written by another process gives."""
    assert isinstance(record.event, ApprovalDecided)
    return _from_log(record.event, record)
