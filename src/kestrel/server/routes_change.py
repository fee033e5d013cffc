"""Routes for what a session changed and spent: its patch and bundle, checkpoints and usage.

The patch and the bundle are read from the session's checkpoints (`service.change_export`), so
they can be had while the session runs, while its change waits for review, and after it was
applied; the `Kestrel-Change` header says which of `none`, `pending` or `applied` it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel

from kestrel.agent.state import replay
from kestrel.protocol.events import (
    CheckpointCreated,
    ContextAdded,
    ContextCompacted,
    ModelCompleted,
    Rewound,
    SubagentFinished,
)
from kestrel.protocol.messages import Usage
from kestrel.server.accounts import Principal
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.hosting import Hosting, Refusal
from kestrel.service.change_export import (
    ChangeUnavailable,
    SessionChange,
    change_bundle,
    change_patch,
    session_change,
)

router = APIRouter(responses=ERRORS)

STATE_HEADER = "Kestrel-Change"
"""none: the session changed nothing; pending: (part of) its change waits for review;
applied: all of it was applied to the session's checkout."""


class FileChangeView(BaseModel):
    """One path a checkpoint changed: A(dded), M(odified), D(eleted) or R(enamed from old_path)."""

    path: str
    status: Literal["A", "M", "D", "R"]
    old_path: str | None = None


class CheckpointView(BaseModel):
    """A recorded state of the session's files, which a rewind can bring back."""

    number: int
    """1 for the session's first checkpoint, then in the order they were recorded."""
    id: str
    event: int
    """The number of its `checkpoint_created` event in the session's log."""
    turn: int
    """How many replies of the model came before it: the step of the session it follows."""
    label: str
    created_at: float
    baseline: bool
    """Recorded when a new overlay of the checkout opened: a later change counts from here."""
    rewound: bool
    """A later rewind went back past it: the conversation no longer counts from it."""
    calls: list[str]
    files: list[FileChangeView]
    more_files: int


class PlanView(BaseModel):
    """The tenant's plan and its limits; a null budget is no budget."""

    name: str
    tier: int
    max_concurrent_sessions: int
    max_queued_sessions: int
    tokens_per_day: int | None
    usd_per_day: float | None
    allowed_models: list[str]
    """Globs over model names; empty: every model."""
    max_wall_s: float


class UsageView(BaseModel):
    """What the calling tenant uses now and spent today, and the limits of its plan."""

    running: int
    queued: int
    tokens_today: int
    usd_today: float
    seconds_until_day_resets: float | None
    plan: PlanView


class ModelSpend(BaseModel):
    """What the calls to one model cost."""

    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    tokens: int
    cost_usd: float
    priced: bool
    """False when the model has no price, so `cost_usd` is only a lower bound."""


class CostView(BaseModel):
    """A session's tokens and dollars (its subagents' included), in all and per model."""

    session_id: str
    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    tokens: int
    cost_usd: float
    cost_known: bool
    tokens_estimated: bool
    models: list[ModelSpend]


_STATE_DOC = {"description": "none, pending or applied", "schema": {"type": "string"}}
_PATCH: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The change as a unified git diff (`git apply`); empty when there is none.",
        "content": {"text/x-diff": {"schema": {"type": "string"}}},
        "headers": {STATE_HEADER: _STATE_DOC},
    }
}
_BUNDLE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A git bundle of one commit, the change, on top of the base commit.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "headers": {STATE_HEADER: _STATE_DOC},
    }
}


@router.get("/sessions/{session_id}/patch", response_class=Response, responses=_PATCH)
def patch(session_id: str, who: Caller, host: Host) -> Response:
    """The session's whole change as a unified git diff against the commit it started from
    (`git apply` takes it), whether it waits for review or was applied; an empty body with
    `Kestrel-Change: none` when the session changed nothing."""
    change = _change(host, who, session_id)
    text = _exported(change_patch, change)
    return Response(text, media_type="text/x-diff", headers={STATE_HEADER: change.state})


@router.get("/sessions/{session_id}/bundle", response_class=Response, responses=_BUNDLE)
def bundle(
    session_id: str,
    who: Caller,
    host: Host,
    full: bool = Query(default=False),
) -> Response:
    """A git bundle of one commit, the session's change on top of the commit it started from,
    as branch `kestrel/<session id>` and HEAD: `git fetch FILE` then `git merge FETCH_HEAD`. The
    receiving repository needs that commit; with `full=true` the bundle holds its history too
    (for an upload, whose first commit the server made). 409 when the session changed nothing."""
    change = _change(host, who, session_id)
    data = _exported(lambda c: change_bundle(c, full=full), change)
    headers = {
        STATE_HEADER: change.state,
        "Content-Disposition": f'attachment; filename="{session_id}.bundle"',
    }
    return Response(data, media_type="application/octet-stream", headers=headers)


def _change(host: Hosting, who: Principal, session_id: str) -> SessionChange:
    host.session(who, session_id)
    try:
        return session_change(host.store, session_id, host.config.data_dir)
    except ChangeUnavailable as exc:
        raise Refusal(409, str(exc)) from None


def _exported(export: Callable[[SessionChange], bytes], change: SessionChange) -> bytes:
    try:
        return export(change)
    except ChangeUnavailable as exc:
        raise Refusal(409, str(exc)) from None


@router.get("/sessions/{session_id}/checkpoints")
def checkpoints(session_id: str, who: Caller, host: Host) -> list[CheckpointView]:
    """The session's checkpoints from its log, oldest first (empty until a tool changes files)."""
    host.session(who, session_id)
    records = host.store.read(session_id)
    rewinds = [(r.event.to_seq, r.seq) for r in records if isinstance(r.event, Rewound)]
    shown: list[CheckpointView] = []
    turns = 0
    for record in records:
        event = record.event
        turns += isinstance(event, ModelCompleted)
        if not isinstance(event, CheckpointCreated):
            continue
        files = [
            FileChangeView(path=c.path, status=c.status, old_path=c.old_path) for c in event.changes
        ]
        shown.append(
            CheckpointView(
                number=len(shown) + 1,
                id=event.checkpoint_id,
                event=record.seq,
                turn=turns,
                label=event.label,
                created_at=record.at,
                baseline=event.baseline,
                rewound=any(start < record.seq < end for start, end in rewinds),
                calls=list(event.call_ids),
                files=files,
                more_files=event.more_changes,
            )
        )
    return shown


@router.get("/usage")
def usage(who: Caller, host: Host) -> UsageView:
    """The calling tenant's sessions running and queued, its spend since the day began, when
    the daily budgets start afresh, and its plan's limits."""
    used = host.usage(who)
    plan = host.plan_of(who)
    return UsageView(
        running=used.running,
        queued=used.queued,
        tokens_today=used.tokens_today,
        usd_today=used.usd_today,
        seconds_until_day_resets=used.seconds_until_day_resets,
        plan=PlanView(
            name=plan.name,
            tier=plan.tier,
            max_concurrent_sessions=plan.max_concurrent_sessions,
            max_queued_sessions=plan.max_queued_sessions,
            tokens_per_day=plan.tokens_per_day,
            usd_per_day=plan.usd_per_day,
            allowed_models=list(plan.allowed_models),
            max_wall_s=plan.max_wall_s,
        ),
    )


@router.get("/sessions/{session_id}/cost")
def cost(session_id: str, who: Caller, host: Host) -> CostView:
    """The session's tokens and dollars from its log, its subagents' included, and the same
    per model."""
    host.session(who, session_id)
    totals = replay(host.store.read(session_id)).totals
    spend: dict[str, ModelSpend] = {}
    _spend_of(host, session_id, spend, seen=set())
    return CostView(
        session_id=session_id,
        turns=totals.turns,
        tool_calls=totals.tool_calls,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        cache_write_tokens=totals.cache_write_tokens,
        cache_read_tokens=totals.cache_read_tokens,
        tokens=totals.tokens,
        cost_usd=totals.cost_usd,
        cost_known=totals.cost_known,
        tokens_estimated=totals.tokens_estimated,
        models=sorted(spend.values(), key=lambda m: (-m.cost_usd, m.model)),
    )


def _spend_of(host: Hosting, session_id: str, spend: dict[str, ModelSpend], seen: set[str]) -> bool:
    """Add what each model call of the session (and of its subagents' sessions) cost; whether
    the session has a log."""
    seen.add(session_id)
    records = host.store.read(session_id)
    for record in records:
        event = record.event
        spends = ModelCompleted | ContextCompacted | ContextAdded
        used = event.usage if isinstance(event, spends) else None
        if used is not None:
            _add(spend, used)
        elif isinstance(event, SubagentFinished) and event.child_session_id not in seen:
            _spend_of_subagent(host, event, spend, seen)
    return bool(records)


def _spend_of_subagent(
    host: Hosting, event: SubagentFinished, spend: dict[str, ModelSpend], seen: set[str]
) -> None:
    """A subagent's spend per model from its own log; without one, its totals under its name."""
    if _spend_of(host, event.child_session_id, spend, seen):
        return
    spent = event.totals
    used = Usage(
        model=f"{event.agent} (subagent)",
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        cache_write_tokens=spent.cache_write_tokens,
        cache_read_tokens=spent.cache_read_tokens,
        cost_usd=spent.cost_usd,
        priced=spent.cost_known,
    )
    _add(spend, used)


def _add(spend: dict[str, ModelSpend], used: Usage) -> None:
    was = spend.get(used.model) or ModelSpend(
        model=used.model,
        calls=0,
        input_tokens=0,
        output_tokens=0,
        cache_write_tokens=0,
        cache_read_tokens=0,
        tokens=0,
        cost_usd=0.0,
        priced=True,
    )
    spend[used.model] = ModelSpend(
        model=used.model,
        calls=was.calls + 1,
        input_tokens=was.input_tokens + used.input_tokens,
        output_tokens=was.output_tokens + used.output_tokens,
        cache_write_tokens=was.cache_write_tokens + used.cache_write_tokens,
        cache_read_tokens=was.cache_read_tokens + used.cache_read_tokens,
        tokens=was.tokens + used.total_input_tokens + used.output_tokens,
        cost_usd=was.cost_usd + used.cost_usd,
        priced=was.priced and used.priced,
    )
