"""A recording reverse proxy: every exchange with a real server becomes a JSON wire fixture.

The proxy listens on 127.0.0.1, forwards each request to the upstream server, relays the reply to
the client as it arrives (keeping the server's chunk boundaries) and writes one fixture per
exchange: the request (method, path, the headers that matter, body) and the response (status,
headers, and the body bytes exactly as received, split in the chunks the server sent).

    python bench/providers/wire_record.py --upstream http://127.0.0.1:8080 --out /tmp/wire

Fixtures are what `tests/models/wire_replay.py` serves back, byte for byte, to the provider tests.
A chunk is stored as a JSON string when it is valid UTF-8 (which keeps SSE frames readable and
exact) and as {"base64": ...} otherwise, such as a chunk that splits a multi-byte character. The
request's Authorization header is forwarded as sent but stored with its key replaced, so pointing
the proxy at a hosted API never writes a real key into a fixture.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

# Request headers worth keeping in a fixture: they change what a server does.
REQUEST_HEADERS = ("content-type", "authorization", "accept", "user-agent")
# Hop-by-hop headers: they describe one connection, so the proxy and the replay set their own.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}
)
Chunk = str | dict[str, str]


@dataclass
class Exchange:
    """One request and the reply a real server gave to it."""

    method: str
    path: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int = 0
    reason: str = ""
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    framing: str = "length"
    """How the server delimited the body: "chunked", "length" (Content-Length) or "close"."""
    chunks: list[bytes] = field(default_factory=list)
    cut: bool = False
    """The connection ended before the body did (a chunked body without its last chunk)."""

    def to_json(self, meta: dict[str, Any]) -> dict[str, Any]:
        """The fixture document, with `meta` (server, scenario, note) on top."""
        request: dict[str, Any] = {
            "method": self.method,
            "path": self.path,
            "headers": self.request_headers,
        }
        try:
            request["body_json"] = json.loads(self.request_body) if self.request_body else None
        except ValueError:
            request["body_text"] = self.request_body.decode("utf-8", "replace")
        response = {
            "status": self.status,
            "reason": self.reason,
            "headers": [list(pair) for pair in self.response_headers],
            "framing": self.framing,
            "cut": self.cut,
            "chunks": [encode_chunk(chunk) for chunk in self.chunks],
        }
        return {**meta, "request": request, "response": response}


def encode_chunk(data: bytes) -> Chunk:
    """A chunk as JSON: the text when it is valid UTF-8, else its base64 form."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def decode_chunk(chunk: Chunk) -> bytes:
    """The exact bytes of one stored chunk."""
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return base64.b64decode(chunk["base64"])


def redact(authorization: str) -> str:
    """An Authorization value with its credentials replaced: `Bearer sk-...` -> `Bearer <key>`."""
    scheme, _, credentials = authorization.partition(" ")
    return f"{scheme} <key>" if credentials else "<key>"


def read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """The chunks of a chunked HTTP body as the sender framed them; stops early on a cut stream.

    Raises `EOFError` when the connection ends before the terminating zero-size chunk.
    """
    while True:
        line = stream.readline(65537)
        if not line.strip():
            raise EOFError("the chunked body ended before its last chunk")
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while stream.readline(65537) not in (b"\r\n", b"\n", b""):
                pass  # trailers: none of the servers here send any
            return
        data = stream.read(size)
        if len(data) < size:
            raise EOFError("the chunked body ended inside a chunk")
        yield data
        stream.read(2)


class RecordingProxy:
    """Forwards requests to `upstream` and hands each finished `Exchange` to `sink`."""

    def __init__(self, upstream: str, sink: Callable[[Exchange], None], *, port: int = 0) -> None:
        """Bind 127.0.0.1:`port` (0: any free port); `start` begins serving."""
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.sink = sink
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The proxy's base URL: point the client here instead of at the server."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Serve from a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(proxy: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def do_DELETE(self) -> None:
            self._relay()

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            kept = {k.lower(): v for k, v in self.headers.items() if k.lower() in REQUEST_HEADERS}
            if "authorization" in kept:
                kept["authorization"] = redact(kept["authorization"])
            exchange = Exchange(self.command, self.path, kept, body)
            upstream = http.client.HTTPConnection(
                proxy.upstream_host, proxy.upstream_port, timeout=600
            )
            try:
                forward = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                forward.pop("Host", None)
                upstream.request(self.command, self.path, body=body or None, headers=forward)
                _relay_response(self, upstream.getresponse(), exchange)
            finally:
                upstream.close()
                proxy.sink(exchange)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _relay_response(
    handler: BaseHTTPRequestHandler, reply: http.client.HTTPResponse, exchange: Exchange
) -> None:
    exchange.status, exchange.reason = reply.status, reply.reason
    exchange.response_headers = [(k.lower(), v) for k, v in reply.getheaders()]
    handler.send_response(reply.status, reply.reason)
    for key, value in exchange.response_headers:
        if key not in HOP_BY_HOP and key not in ("date", "server"):
            handler.send_header(key, value)
    if reply.chunked:
        exchange.framing = "chunked"
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            # http.client leaves the raw body on `fp` for a chunked reply: read its own framing.
            assert reply.fp is not None
            for chunk in read_chunks(reply.fp):
                exchange.chunks.append(chunk)
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
        except EOFError:
            exchange.cut = True
            handler.close_connection = True
            return
        handler.wfile.write(b"0\r\n\r\n")
        return
    exchange.framing = "length" if reply.length is not None else "close"
    while data := reply.read1(65536):
        exchange.chunks.append(data)
    payload = b"".join(exchange.chunks)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def write_fixture(path: Path, exchange: Exchange, meta: dict[str, Any]) -> None:
    """Write one exchange as a fixture file (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = exchange.to_json({**meta, "recorded_at": _utc_stamp()})
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _utc_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until interrupted, writing exchange-NNN.json files into --out."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--upstream", required=True, help="the real server, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the fixtures")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    args = parser.parse_args(argv)
    counter = iter(range(1, 1_000_000))

    def save(exchange: Exchange) -> None:
        target = args.out / f"exchange-{next(counter):03d}.json"
        write_fixture(target, exchange, {"upstream": args.upstream})
        print(f"{exchange.method} {exchange.path} -> {exchange.status}: {target}", flush=True)

    proxy = RecordingProxy(args.upstream, save, port=args.port)
    proxy.start()
    print(f"recording {args.upstream} through {proxy.url}; Ctrl-C stops", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
