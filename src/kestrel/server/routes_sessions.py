"""Routes for sessions and their events: create, list, show, follow up, and the live stream."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from kestrel.protocol.events import PermissionMode
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.hosting import Refusal
from kestrel.server.intake import archive_source, parse_source
from kestrel.server.registry import Hosted
from kestrel.service.decisions import status_of

router = APIRouter(responses=ERRORS)
HEARTBEAT_S = 15.0


class Strict(BaseModel):
    """A request body: unknown fields are refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


class Source(Strict):
    """Where the repository comes from: a git URL (and ref), or a folder the server allows."""

    git_url: str | None = None
    ref: str | None = None
    path: str | None = None


class NewSessionBody(Strict):
    """A session to start."""

    task: str = Field(min_length=1, max_length=100_000)
    source: Source
    model: str | None = None
    permission_mode: PermissionMode | None = None
    plan_first: bool = False


class SessionView(BaseModel):
    """A session as the API shows it."""

    id: str
    task: str
    model: str
    status: Literal["queued", "running", "idle"]
    finished: str | None
    waiting_on: str
    last_seq: int
    """The number of the session's newest event: a stream from here misses nothing new."""
    tokens: int
    cost_usd: float
    created_at: float


class MessageBody(Strict):
    """A follow-up message."""

    text: str = Field(min_length=1, max_length=100_000)


def view(host: Host, hosted: Hosted) -> SessionView:
    """The API's view of a hosted session, from the registry and its log."""
    status = status_of(host.store, hosted.session_id)
    return SessionView(
        id=hosted.session_id,
        task=status.task,
        model=status.model,
        status=hosted.status,
        finished=status.finished.reason if status.finished else None,
        waiting_on=status.waiting_on,
        last_seq=status.last_seq,
        tokens=status.state.totals.tokens,
        cost_usd=status.state.totals.cost_usd,
        created_at=hosted.created_at,
    )


@router.post("/sessions", status_code=201)
def create(body: NewSessionBody, who: Caller, host: Host) -> SessionView:
    """Start a session on a repository; it is queued and runs when a worker is free."""
    source = parse_source(body.source.model_dump(exclude_none=True))
    flags: dict[str, object] = {"model": body.model, "permission_mode": body.permission_mode}
    flags["plan_first"] = body.plan_first or None
    hosted = host.create(who, body.task, source, {k: v for k, v in flags.items() if v})
    return view(host, hosted)


@router.post("/sessions/upload", status_code=201)
async def upload(
    request: Request,
    who: Caller,
    host: Host,
    task: str = Query(min_length=1, max_length=100_000),
    kind: Literal["tar", "tar.gz", "bundle"] = Query(),
    model: str | None = Query(default=None),
    permission_mode: Annotated[PermissionMode | None, Query()] = None,
    plan_first: bool = Query(default=False),
) -> SessionView:
    """Start a session on an uploaded repository: a tarball or a git bundle as the body."""
    data = await request.body()
    source = archive_source(data, kind)
    given = {"model": model, "permission_mode": permission_mode, "plan_first": plan_first or None}
    flags: dict[str, object] = {k: v for k, v in given.items() if v}
    # Unpacking and starting the session block: off the event loop, as the JSON route runs.
    hosted = await asyncio.to_thread(host.create, who, task, source, flags)
    return view(host, hosted)


@router.get("/sessions")
def list_sessions(who: Caller, host: Host) -> list[SessionView]:
    """The tenant's sessions, newest first."""
    return [view(host, hosted) for hosted in host.registry.of_tenant(who.tenant_id)]


@router.get("/sessions/{session_id}")
def show(session_id: str, who: Caller, host: Host) -> SessionView:
    """One session."""
    return view(host, host.session(who, session_id))


@router.post("/sessions/{session_id}/messages", status_code=202)
def follow_up(session_id: str, body: MessageBody, who: Caller, host: Host) -> SessionView:
    """Send a follow-up: the session runs again with it (409 while it runs or waits to)."""
    hosted = host.session(who, session_id)
    if not host.pool.submit(hosted, body.text, only_if="idle"):
        raise Refusal(409, f"session {session_id} is {hosted.status}; send it when it stops")
    return view(host, host.session(who, session_id))


@router.post("/sessions/{session_id}/resume", status_code=202)
def resume(session_id: str, who: Caller, host: Host) -> SessionView:
    """Continue a session that was stopped (cancelled, or cut by an error) from where its log
    ends; a session that finished its task takes a follow-up instead (409)."""
    hosted = host.session(who, session_id)
    finished = status_of(host.store, session_id).finished
    if finished is not None and finished.reason not in ("cancelled", "error"):
        said = f"session {session_id} finished ({finished.reason}); send a follow-up instead"
        raise Refusal(409, said)
    if not host.pool.submit(hosted, None, only_if="idle"):
        raise Refusal(409, f"session {session_id} is {hosted.status}; it is not stopped")
    return view(host, host.session(who, session_id))
