"""Routes for a session's events: the log from an offset, and live over SSE or a WebSocket.

Events are the log's records in its JSON form, with the server's own folders left out: the
session's checkout reads as `.` and the rest of the data folder as `<server>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Header, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from kestrel.protocol.codec import record_to_json
from kestrel.protocol.errors import StoreError
from kestrel.protocol.events import Record
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.registry import Hosted

router = APIRouter(responses=ERRORS)
HEARTBEAT_S = 15.0
SSE_BATCH = 64
"""Records at most that go out in one write when a client is behind (a session opened late)."""
STATUS_EVERY_S = 1.0
"""How often a live stream checks whether the session's status changed (`event: status`)."""


@router.get("/sessions/{session_id}/events")
def events(
    session_id: str,
    who: Caller,
    host: Host,
    after: int = Query(default=0, ge=0),
    limit: int = Query(default=1000, ge=1, le=10_000),
) -> list[dict[str, object]]:
    """The session's events after `after`, oldest first, in the log's JSON form."""
    hosted = host.session(who, session_id)
    records = host.store.read(session_id, after)[:limit]
    return [json.loads(public_json(host, hosted, r)) for r in records]


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
    client only falls behind and never makes the server hold more.

    Whenever the session's status changes (and once at the start) an `event: status` without
    an `id:` says `{"status": "queued"|"running"|"idle"}`: a run is over when it says idle."""
    hosted = host.session(who, session_id)
    start = int(last_event_id) if last_event_id and last_event_id.isdigit() else after
    return StreamingResponse(
        _sse(host, hosted, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _sse(host: Host, hosted: Hosted, after: int) -> AsyncIterator[str]:
    # A small buffer between the log and the client: when the client is slow the pump waits,
    # and the rest of the events stay in the log until it catches up.
    buffer: asyncio.Queue[Record] = asyncio.Queue(maxsize=64)

    async def pump() -> None:
        async for record in host.fanout.follow(hosted.session_id, after):
            await buffer.put(record)

    pumping = asyncio.create_task(pump())
    said_status, quiet_s, checked = "", 0.0, 0.0
    try:
        while True:
            if time.monotonic() - checked >= STATUS_EVERY_S:  # Not once per event: a backlog
                checked = time.monotonic()  # of thousands goes out without a query each.
                status = await asyncio.to_thread(_status, host, hosted)
                if status and status != said_status:
                    said_status = status
                    yield f"event: status\ndata: {json.dumps({'status': status})}\n\n"
            try:  # asyncio.timeout: 3.11's wait_for can swallow the cancel of a closed stream
                async with asyncio.timeout(STATUS_EVERY_S):
                    record = await buffer.get()
            except TimeoutError:
                quiet_s += STATUS_EVERY_S
                if quiet_s >= HEARTBEAT_S:
                    quiet_s = 0.0
                    yield ": keep-alive\n\n"
                continue
            quiet_s = 0.0
            ready = [record]  # What else is waiting goes out in the same write.
            while not buffer.empty() and len(ready) < SSE_BATCH:
                ready.append(buffer.get_nowait())
            yield "".join(_sse_event(host, hosted, r) for r in ready)
    finally:
        pumping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumping


def _sse_event(host: Host, hosted: Hosted, record: Record) -> str:
    kind = record.event.type
    return f"id: {record.seq}\nevent: {kind}\ndata: {public_json(host, hosted, record)}\n\n"


def _status(host: Host, hosted: Hosted) -> str:
    try:
        now = host.registry.get(hosted.tenant_id, hosted.session_id)
    except StoreError:  # The database away: the stream waits, it does not end.
        return ""
    return now.status if now is not None else hosted.status


def public_json(host: Host, hosted: Hosted, record: Record) -> str:
    """The record as JSON, with the server's folders left out (they are no client's business)."""
    text = record_to_json(record)
    text = text.replace(str(hosted.checkout), ".")
    return text.replace(str(host.config.data_dir), "<server>")


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
    hosted = await asyncio.to_thread(host.registry.get, who.tenant_id, session_id)
    if hosted is None:
        await websocket.close(code=4404, reason=f"no session {session_id}")
        return
    await websocket.accept(subprotocol=WS_PROTOCOL if WS_PROTOCOL in offered else None)

    async def send() -> None:
        async for record in host.fanout.follow(session_id, max(after, 0)):
            await websocket.send_text(public_json(host, hosted, record))

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
