"""The HTTP API of `kestrel serve`: FastAPI over the hosted mode, every route scoped by tenant."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from kestrel.protocol.errors import KestrelError
from kestrel.server import routes_decisions, routes_sessions
from kestrel.server.hosting import Hosting, Refusal, ServerConfig


def create_app(config: ServerConfig) -> FastAPI:
    """The API, with the hosted mode opened on start and its workers stopped on shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        hosting = Hosting.open(config)
        api.state.hosting = hosting
        hosting.pool.start()
        hosting.fanout.start()
        try:
            yield
        finally:
            await hosting.fanout.stop()
            await hosting.pool.stop()
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
    api.include_router(routes_decisions.router, prefix="/v1")

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return api


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}


def _errors(api: FastAPI) -> None:
    @api.exception_handler(Refusal)
    async def refused(_: Request, exc: Refusal) -> Response:
        code = {409: "conflict", 413: "too_large", 429: "limit"}.get(exc.status)
        return _error(exc.status, code or _CODES.get(exc.status, "error"), exc.message, exc.headers)

    @api.exception_handler(KestrelError)
    async def kestrel_error(_: Request, exc: KestrelError) -> Response:
        return _error(400, "bad_request", str(exc))

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return _error(422, "invalid_request", problems or "the request is not valid")


def _limit_bodies(api: FastAPI, limit: int) -> None:
    @api.middleware("http")
    async def limit_body(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return _error(413, "too_large", f"the request body is over {limit} bytes")
        return await call_next(request)


def dumps(value: object) -> str:
    """JSON text of a value the API returns."""
    return json.dumps(value, ensure_ascii=False)
