"""Find out which server answers at an OpenAI-compatible base URL, with a few cheap GETs.

The probe never calls a model: it reads `GET /v1/models` (each server writes its own `owned_by`
and some a `Server` header), then llama.cpp's `GET /props` and Ollama's `GET /api/version` at
the server's root while the kind is still unknown. When nothing answers, the URL's port is the
last hint, and after that the safe defaults of an unknown server apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx2

from kestrel.models.endpoint import (
    ServerKind,
    kind_from_owner,
    kind_from_port,
    kind_from_server_header,
    kind_from_url,
)

PROBE_TIMEOUT_S = 3.0
"""Each GET of the probe gives up after this long; a slow probe must not stall a session."""


@dataclass(frozen=True, slots=True)
class Detection:
    """The server kind found at a URL (None: not found) and how, in words."""

    kind: ServerKind | None
    evidence: str
    reached: bool = True
    """False when the server could not be reached at all."""


def detect(
    base_url: str | None,
    *,
    api_key: str | None = None,
    probe: bool = True,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Detection:
    """The kind of server at `base_url` (None: OpenAI's API): from its URL, a probe, its port."""
    known = kind_from_url(base_url)
    if known is not None or base_url is None:
        host = "OpenAI's API" if known == "openai" else "OpenRouter"
        return Detection(known, f"the URL is {host}", reached=False)
    found = probe_server(base_url, api_key=api_key, timeout_s=timeout_s) if probe else None
    if found is not None and found.kind is not None:
        return found
    by_port = kind_from_port(base_url)
    said = found.evidence if found is not None else "not probed"
    if by_port is not None:
        return Detection(by_port, f"{said}; its port is {by_port}'s default", reached=False)
    return Detection(None, said, reached=found.reached if found is not None else False)


def probe_server(base_url: str, *, api_key: str | None, timeout_s: float) -> Detection:
    """GET the model list, then the root's llama.cpp and Ollama pages, until one names the kind."""
    base = base_url.rstrip("/")
    root = base.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx2.Client(timeout=timeout_s, headers=headers, follow_redirects=True) as client:
        try:
            models = client.get(f"{base}/models")
        except (httpx2.HTTPError, httpx2.InvalidURL, OSError, ValueError) as exc:
            return Detection(None, f"GET {base}/models failed: {describe_http_error(exc)}", False)
        named = kind_from_server_header(models.headers.get("server", ""))
        if named is not None:
            return Detection(named, f"its Server header says {models.headers['server']}")
        owner = _owner(models)
        if owner is not None and (kind := kind_from_owner(owner)) is not None:
            return Detection(kind, f'/models lists models owned by "{owner}"')
        if _json_has(client, f"{root}/props", ("default_generation_settings", "build_info")):
            return Detection("llama-server", "it serves llama.cpp's /props")
        if _json_has(client, f"{root}/api/version", ("version",)):
            return Detection("ollama", "it serves Ollama's /api/version")
    if models.status_code >= 400:
        return Detection(None, f"GET {base}/models answered HTTP {models.status_code}")
    seen = f'owned by "{owner}"' if owner else "no owner"
    return Detection(None, f"/models names {seen}, which no known server writes")


def _owner(response: httpx2.Response) -> str | None:
    """The `owned_by` of the first model listed, if the response is a model list."""
    body = _json(response)
    data = body.get("data") if isinstance(body, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    owner = first.get("owned_by") if isinstance(first, dict) else None
    return owner if isinstance(owner, str) and owner else None


def _json_has(client: httpx2.Client, url: str, keys: tuple[str, ...]) -> bool:
    try:
        response = client.get(url)
    except (httpx2.HTTPError, httpx2.InvalidURL, OSError, ValueError):
        return False
    body = _json(response) if response.status_code == 200 else None
    return isinstance(body, dict) and any(key in body for key in keys)


def _json(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


def describe_http_error(exc: BaseException) -> str:
    """A short reason for a failed HTTP exchange, without Python's error numbers."""
    if isinstance(exc, httpx2.TimeoutException):
        return "timed out"
    text = _ERRNO.sub("", str(exc).strip()) or type(exc).__name__
    if isinstance(exc, httpx2.ConnectError):
        return f"could not connect: {text[:1].lower()}{text[1:]}"
    return text
