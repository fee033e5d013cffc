"""`GET /metrics`: the cluster's gauges in Prometheus' text format, from any server.

Served in cluster mode only (the figures are the cluster's: the queue by tier, runs under way,
live workers, failovers; nothing names a tenant or a session). Cluster-wide figures are the
operator's, not a tenant's, so the route answers a scraper on the same machine (a loopback
address) or one that sends `Authorization: Bearer` with the token in `KESTREL_METRICS_TOKEN`;
anyone else gets 404, as on a server without it. Per-run figures (step latency, commands
started) are each worker's own, at `kestrel worker --metrics-port`.
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

TOKEN_ENV = "KESTREL_METRICS_TOKEN"  # noqa: S105 (the variable's name, not a secret)
_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def add_metrics(api: FastAPI, store_url: str | None) -> None:
    """Add `/metrics` (not in the schema) to `api`."""

    @api.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        if store_url is None or not _allowed(request):
            body = {"error": {"code": "not_found", "message": "no such route"}}
            return JSONResponse(body, status_code=404)
        from kestrel.cluster.metrics import text

        return Response(text(store_url), media_type=_TEXT)


def _allowed(request: Request) -> bool:
    token = os.environ.get(TOKEN_ENV, "")
    sent = request.headers.get("authorization", "")
    if token and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        return True
    host = request.client.host if request.client is not None else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
