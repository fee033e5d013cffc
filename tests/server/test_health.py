"""Liveness and readiness of a server on one machine: both answer, readiness after reaching the
SQLite files, and neither is part of the API's schema."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from server_kit import Server


def test_the_server_is_alive_and_ready(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    schema = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())
    assert not {"/healthz", "/readyz"} & set(schema["paths"])
