"""Replays a recorded wire fixture (tests/fixtures/wire/) byte for byte from a loopback server.

A fixture is one exchange with a real server, written by bench/providers/wire_record.py: the
request, then the response's status, headers, framing and body chunks exactly as received. The
replay sends the same status line and headers, frames the body the same way (chunked, with the
server's chunk boundaries, or with a Content-Length) and flushes after every chunk. A body the
server ended by closing the connection (framing "close"; none of the recorded servers does that)
is sent with a Content-Length.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from wire_server import send_chunked

WIRE = Path(__file__).parents[1] / "fixtures" / "wire"
# Set by the replay for its own connection, as the recording proxy did.
_NOT_REPLAYED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}
)


@dataclass(frozen=True)
class Fixture:
    """One recorded exchange."""

    name: str
    server: str
    method: str
    path: str
    request_body: Any
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    framing: str
    cut: bool
    chunks: tuple[bytes, ...]

    @property
    def body(self) -> bytes:
        """The whole response body."""
        return b"".join(self.chunks)

    def json_body(self) -> Any:
        """The response body parsed as JSON (for error and non-streamed replies)."""
        return json.loads(self.body)

    def sse_data(self) -> list[Any]:
        """The parsed `data:` payloads of an SSE body, without the final [DONE]."""
        frames = []
        for line in self.body.decode("utf-8").splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                frames.append(json.loads(line[len("data: ") :]))
        return frames


def load(path: Path) -> Fixture:
    """Read one fixture file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    request, response = doc["request"], doc["response"]
    return Fixture(
        name=path.stem,
        server=doc.get("server", ""),
        method=request["method"],
        path=request["path"],
        request_body=request.get("body_json"),
        status=response["status"],
        reason=response["reason"],
        headers=tuple((key, value) for key, value in response["headers"]),
        framing=response["framing"],
        cut=response["cut"],
        chunks=tuple(_chunk_bytes(chunk) for chunk in response["chunks"]),
    )


def _chunk_bytes(chunk: str | dict[str, str]) -> bytes:
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return base64.b64decode(chunk["base64"])


def fixture(server: str, name: str) -> Fixture:
    """The fixture `name` recorded from `server` (a folder under tests/fixtures/wire)."""
    return load(WIRE / server / f"{name}.json")


def servers() -> list[str]:
    """The servers fixtures were recorded from."""
    return sorted(p.name for p in WIRE.iterdir() if p.is_dir()) if WIRE.is_dir() else []


@dataclass(frozen=True)
class Seen:
    """A request the replay server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ReplayServer:
    """Answers every request on 127.0.0.1 with one fixture's recorded response."""

    def __init__(self, recorded: Fixture) -> None:
        self.fixture = recorded
        self.seen: list[Seen] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The server's root URL (no path)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """The base URL a client must use for its chat request to hit the recorded path."""
        suffix = "/chat/completions"
        path = self.fixture.path
        prefix = path[: -len(suffix)] if path.endswith(suffix) else "/v1"
        return self.url + prefix

    def start(self) -> None:
        """Serve from a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._replay()

        def do_POST(self) -> None:
            self._replay()

        def _replay(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {key.lower(): value for key, value in self.headers.items()}
            server.seen.append(Seen(self.command, self.path, headers, raw))
            recorded = server.fixture
            self.send_response(recorded.status, recorded.reason)
            for key, value in recorded.headers:
                if key not in _NOT_REPLAYED:
                    self.send_header(key, value)
            if recorded.framing == "chunked":
                self._chunked(recorded)
            else:
                self.send_header("Content-Length", str(len(recorded.body)))
                self.end_headers()
                for chunk in recorded.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()

        def _chunked(self, recorded: Fixture) -> None:
            send_chunked(self, recorded.chunks, cut=recorded.cut)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def replaying(recorded: Fixture) -> Iterator[ReplayServer]:
    """A started replay server, stopped when the generator closes (the body of a fixture)."""
    server = ReplayServer(recorded)
    server.start()
    try:
        yield server
    finally:
        server.stop()
