"""Decisions a person makes on a session that is not running: its plan, a stop, its status.

Each is written to the session's log, so whichever process runs the session next acts on it.
The plan decision returns what the model is told next: the caller runs the session with it
(`kestrel resume ID MESSAGE`, or a server's worker).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from kestrel.agent.planning import Approve, Reject, record_decision
from kestrel.agent.state import SessionState, apply, replay
from kestrel.protocol.errors import ConfigError, KestrelError
from kestrel.protocol.events import (
    CancelRequested,
    ChangesApplied,
    ChangesReady,
    Event,
    PlanProposed,
    Record,
    SessionFinished,
)
from kestrel.store.base import EventStore
from kestrel.tools.plan import PlanInvalid


class NotRunning(KestrelError):
    """A stop was asked of a session that has finished."""


RUN_REQUESTED_AT = "KESTREL_RUN_REQUESTED_AT"
"""Set by whoever starts a process for a run: the log's last seq when the run was asked for.
A stop asked for between then and the process's start (while a server's worker launched it)
must stop the run too, not be lost."""


def requested_at(after_seq: int) -> int:
    """Where a run looks for a stop from: when it was asked for, if that is earlier."""
    raw = os.environ.get(RUN_REQUESTED_AT, "")
    return min(after_seq, int(raw)) if raw.isdigit() else after_seq


def decide_plan(
    store: EventStore, session_id: str, decision: Approve | Reject, plan_id: str | None = None
) -> str:
    """Log the decision on the plan the session waits on; return what the model is told next."""
    state = replay(store.read(session_id))

    def emit(event: Event) -> Record:
        record = store.append(session_id, event)
        apply(state, record)
        return record

    try:
        return record_decision(state, emit, decision, plan_id)
    except PlanInvalid as exc:
        raise ConfigError(f"the plan cannot be used:\n{exc}") from None


def request_cancel(store: EventStore, session_id: str, *, by: str, reason: str = "") -> None:
    """Ask the process running the session to stop it (as Ctrl-C there would)."""
    if replay(store.read(session_id)).finished is not None:
        raise NotRunning(f"session {session_id} is not running; nothing to cancel")
    store.append(session_id, CancelRequested(by=by, reason=reason))


WaitingOn = str
"""What a session waits on a person for: `approval`, `plan`, `review`, or empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """Where a session stands, from its log alone."""

    session_id: str
    task: str
    model: str
    finished: SessionFinished | None
    waiting_on: WaitingOn
    last_seq: int
    state: SessionState


def status_of(store: EventStore, session_id: str) -> Status:
    """The session's standing: finished or not, and what it waits on a person for."""
    records = store.read(session_id)
    state = replay(records)
    return Status(
        session_id=session_id,
        task=state.task,
        model=state.model,
        finished=state.finished,
        waiting_on=_waiting_on(state, records),
        last_seq=state.last_seq,
        state=state,
    )


def _waiting_on(state: SessionState, records: Sequence[Record]) -> WaitingOn:
    if state.asks.waiting():
        return "approval"
    if state.plan is not None and state.finished is not None:
        return "plan"
    for record in reversed(records):
        if isinstance(record.event, ChangesApplied):
            return ""
        if isinstance(record.event, ChangesReady):
            return "review"
    return ""


def plan_as_json(plan: PlanProposed) -> str:
    """The plan as a person edits it: a JSON object with `summary` and `steps`."""
    steps = [
        {
            "id": s.id,
            "title": s.title,
            "files": list(s.files),
            "checks": list(s.checks),
            "depends_on": list(s.depends_on),
        }
        for s in plan.steps
    ]
    return json.dumps({"summary": plan.summary, "steps": steps}, indent=2, ensure_ascii=False)
