"""The HTTP API of `kestrel serve`: FastAPI over the hosted mode, every route scoped by tenant."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kestrel.delivery.forges import forge_settings
from kestrel.protocol.errors import KestrelError, StoreError, StoreFull
from kestrel.server import (
    routes_admin,
    routes_change,
    routes_decisions,
    routes_delivery,
    routes_events,
    routes_memory,
    routes_sessions,
    web,
)
from kestrel.server.hosting import Hosting, Refusal, ServerConfig
from kestrel.server.pull_requests import PullRequests
from kestrel.server.routes_metrics import add_metrics

_log = logging.getLogger("kestrel.server")


def create_app(config: ServerConfig) -> FastAPI:
    """The API, with the hosted mode opened on start and its workers stopped on shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        forge = config.forge or forge_settings(os.environ)
        hosting = Hosting.open(config)
        pulls = PullRequests(hosting, forge)
        api.state.hosting = hosting
        api.state.pulls = pulls
        hosting.pool.start()
        hosting.fanout.start()
        pulls.start()
        try:
            yield
        finally:
            await pulls.stop()
            await hosting.fanout.stop()
            await hosting.pool.stop()
            pulls.close()
            hosting.close()

    api = FastAPI(
        title="Kestrel",
        version="1",
        summary="Run coding sessions, answer their questions, review and apply their changes.",
        lifespan=lifespan,
    )
    _errors(api)
    _limit_bodies(api, config.max_body_bytes)
    api.include_router(routes_sessions.router, prefix="/v1")
    api.include_router(routes_events.router, prefix="/v1")
    api.include_router(routes_decisions.router, prefix="/v1")
    api.include_router(routes_change.router, prefix="/v1")
    api.include_router(routes_delivery.router, prefix="/v1")
    api.include_router(routes_memory.router, prefix="/v1")
    api.include_router(routes_admin.router, prefix="/v1")
    api.include_router(web.panel_router())  # The web panel at /, a client of /v1 like any other.

    _health(api)
    add_metrics(api, config.store_url)
    return api


def _health(api: FastAPI) -> None:
    """Liveness and readiness, for a process manager and a load balancer (not in the schema)."""

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        """Liveness: the process answers (it checks nothing else, so a database outage does
        not get every server restarted)."""
        return {"status": "ok"}

    @api.get("/readyz", include_in_schema=False)
    def readyz(request: Request) -> Response:
        """Readiness: the server reaches its database and event log now (503 otherwise), so a
        load balancer sends requests elsewhere meanwhile."""
        hosting: Hosting | None = getattr(request.app.state, "hosting", None)
        if hosting is None:
            return _error(503, "unavailable", "the server is starting", {"Retry-After": "1"})
        try:
            hosting.ready()
        except (StoreError, sqlite3.Error, OSError) as exc:
            return _unavailable(exc)
        return JSONResponse({"status": "ready"})


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def _unavailable(exc: BaseException) -> Response:
    """503 for a failure of the server's own storage (a full disk, say, or a database that
    cannot be reached): nothing was changed, and the same request may be sent again once the
    operator has made room or the database is back."""
    from kestrel.store.postgres_faults import StoreUnavailable

    full = isinstance(exc, StoreFull) or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC)
    full = full or "full" in str(exc).lower()
    away = isinstance(exc, StoreUnavailable)
    why = "its disk is full" if full else "it cannot use its storage"
    why = "its database cannot be reached" if away else why
    _log.error("storage failure: %s", exc)
    message = f"the server cannot do this now: {why}; try again later"
    return _error(503, "unavailable", message, {"Retry-After": "5" if away else "60"})


_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}


def _errors(api: FastAPI) -> None:
    @api.exception_handler(Refusal)
    async def refused(_: Request, exc: Refusal) -> Response:
        code = {409: "conflict", 413: "too_large", 429: "limit", 502: "forge_error"}.get(exc.status)
        code = code or {503: "unavailable"}.get(exc.status)
        return _error(exc.status, code or _CODES.get(exc.status, "error"), exc.message, exc.headers)

    @api.exception_handler(KestrelError)
    async def kestrel_error(_: Request, exc: KestrelError) -> Response:
        if isinstance(exc, StoreError):  # The server's own storage, not the request.
            return _unavailable(exc)
        return _error(400, "bad_request", str(exc))

    @api.exception_handler(sqlite3.Error)
    async def database_error(_: Request, exc: sqlite3.Error) -> Response:
        return _unavailable(exc)

    @api.exception_handler(OSError)
    async def os_error(_: Request, exc: OSError) -> Response:
        return _unavailable(exc)

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return _error(400, "bad_request", f"the body is not valid JSON: {problems}")
        return _error(422, "invalid_request", problems or "the request is not valid")

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        code = {405: "method_not_allowed"}.get(exc.status_code)
        code = code or _CODES.get(exc.status_code, "error")
        headers = dict(exc.headers) if exc.headers else None
        return _error(exc.status_code, code, str(exc.detail), headers)


def _limit_bodies(api: FastAPI, limit: int) -> None:
    api.add_middleware(BodyLimit, limit=limit)


class BodyLimit:
    """Refuses a request body over `limit` bytes with 413, whether its length is declared or it
    comes in chunks: the body is read (up to the limit) before the route runs."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # The client went away; the route will see it.
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        said = f"the request body is over {self.limit} bytes"
        await _error(413, "too_large", said)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def dumps(value: object) -> str:
    """JSON text of a value the API returns."""
    return json.dumps(value, ensure_ascii=False)
