"""Routes for sessions and their events: create, list, show, follow up, and the live stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from kestrel.protocol.codec import record_to_json
from kestrel.protocol.events import PermissionMode, Record
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
) -> SessionView:
    """Start a session on an uploaded repository: a tarball or a git bundle as the body."""
    data = await request.body()
    source = archive_source(data, kind)
    flags: dict[str, object] = {"model": model} if model else {}
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


@router.get("/sessions/{session_id}/events")
def events(
    session_id: str,
    who: Caller,
    host: Host,
    after: int = Query(default=0, ge=0),
    limit: int = Query(default=1000, ge=1, le=10_000),
) -> list[dict[str, object]]:
    """The session's events after `after`, oldest first, in the log's JSON form."""
    host.session(who, session_id)
    records = host.store.read(session_id, after)[:limit]
    return [json.loads(record_to_json(r)) for r in records]


@router.get("/sessions/{session_id}/events/stream")
async def stream(
    session_id: str,
    who: Caller,
    host: Host,
    after: int = Query(default=0, ge=0),
    last_event_id: str | None = Header(default=None),
) -> StreamingResponse:
    """Server-Sent Events: every event after `after` (or the `Last-Event-ID` a reconnecting
    client sends), then new ones as they are logged; read from the durable log, so a slow
    client only falls behind and never makes the server hold more."""
    host.session(who, session_id)
    start = int(last_event_id) if last_event_id and last_event_id.isdigit() else after
    return StreamingResponse(
        _sse(host, session_id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _sse(host: Host, session_id: str, after: int) -> AsyncIterator[str]:
    # A small buffer between the log and the client: when the client is slow the pump waits,
    # and the rest of the events stay in the log until it catches up.
    buffer: asyncio.Queue[Record] = asyncio.Queue(maxsize=64)

    async def pump() -> None:
        async for record in host.fanout.follow(session_id, after):
            await buffer.put(record)

    pumping = asyncio.create_task(pump())
    try:
        while True:
            try:
                record = await asyncio.wait_for(buffer.get(), HEARTBEAT_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            kind = record.event.type
            yield f"id: {record.seq}\nevent: {kind}\ndata: {record_to_json(record)}\n\n"
    finally:
        pumping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumping


@router.websocket("/sessions/{session_id}/events/ws")
async def events_ws(websocket: WebSocket, session_id: str, after: int = 0) -> None:
    """The same events over a WebSocket: one JSON record per message, from `after` on. The
    token comes in the `Authorization` header or, from a browser (which cannot set headers on a
    WebSocket), as the subprotocol `bearer.ks_...` offered beside `kestrel.v1`. Without a valid
    one, or for another tenant's session, the socket is refused before it opens (HTTP 403) and
    nothing is sent."""
    host = websocket.app.state.hosting
    token, offered = _ws_token(websocket)
    who = await asyncio.to_thread(host.accounts.authenticate, token) if token else None
    if who is None:
        await websocket.close(code=4401, reason="an API token is required")
        return
    if await asyncio.to_thread(host.registry.get, who.tenant_id, session_id) is None:
        await websocket.close(code=4404, reason=f"no session {session_id}")
        return
    await websocket.accept(subprotocol=WS_PROTOCOL if WS_PROTOCOL in offered else None)

    async def send() -> None:
        async for record in host.fanout.follow(session_id, max(after, 0)):
            await websocket.send_text(record_to_json(record))

    async def until_closed() -> None:
        while (await websocket.receive())["type"] != "websocket.disconnect":
            pass  # Clients have nothing to say here; only a close matters.

    tasks = {asyncio.create_task(send()), asyncio.create_task(until_closed())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task


WS_PROTOCOL = "kestrel.v1"
"""The subprotocol a browser offers with its token (`bearer.` + the token) as another."""


def _ws_token(websocket: WebSocket) -> tuple[str, list[str]]:
    """The token a WebSocket client sent, and the subprotocols it offered."""
    header = websocket.headers.get("authorization", "")
    offered = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",")]
    if header.lower().startswith("bearer "):
        return header[7:].strip(), offered
    for protocol in offered:
        if protocol.startswith("bearer."):
            return protocol.removeprefix("bearer."), offered
    return "", offered
