"""The wire recorder (bench/providers/wire_record.py) and the replay round-trip a server's bytes.

A small server in the test sends known bodies; the recording proxy sits in front of it, the
fixture it writes is loaded and replayed, and a client reading the raw HTTP framing must see the
same chunks, byte for byte, from the server, through the proxy and from the replay.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from wire_replay import ReplayServer, load


def _recorder() -> ModuleType:
    path = Path(__file__).parents[2] / "bench" / "providers" / "wire_record.py"
    spec = importlib.util.spec_from_file_location("wire_record", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["wire_record"] = module
    spec.loader.exec_module(module)
    return module


REC = _recorder()
# "é" is two bytes in UTF-8 and the first two chunks split it: each must be stored as base64.
SSE_CHUNKS = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xc3',
    b'\xa9"}}]}\n\n',
    b": ping - a comment line\n\n",
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
    b"data: [DONE]\n\n",
)
ERROR = b'{"error": {"message": "no such model", "type": "not_found_error", "code": 404}}'


class _Origin(BaseHTTPRequestHandler):
    """The "real" server: a chunked SSE stream, a cut stream, or a JSON error with a length."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/v1/error":
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ERROR)))
            self.end_headers()
            self.wfile.write(ERROR)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("X-Origin", "fake")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = SSE_CHUNKS[:2] if self.path == "/v1/cut" else SSE_CHUNKS
        for chunk in chunks:
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        if self.path == "/v1/cut":
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Origin)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    host, port = httpd.server_address[:2]
    yield f"http://{host!s}:{port}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def _post(url: str, path: str) -> tuple[http.client.HTTPResponse, list[bytes], bool]:
    """POST to url+path; the status, the body's chunks as framed on the wire, and if it was cut."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", path, body=b'{"model": "m"}', headers={"Authorization": "Bearer k"})
    reply = connection.getresponse()
    chunks: list[bytes] = []
    cut = False
    try:
        if reply.chunked:
            assert reply.fp is not None
            try:
                chunks.extend(REC.read_chunks(reply.fp))
            except EOFError:
                cut = True
        else:
            chunks.append(reply.read())
    finally:
        connection.close()
    return reply, chunks, cut


def _record(origin: str, path: str, tmp_path: Path) -> tuple[list[bytes], Path]:
    """What a client saw through the proxy, and the fixture the proxy wrote."""
    seen: list[Any] = []
    proxy = REC.RecordingProxy(origin, seen.append)
    proxy.start()
    try:
        _, through_proxy, _ = _post(proxy.url, path)
    finally:
        proxy.stop()
    [exchange] = seen
    target = tmp_path / "recorded.json"
    REC.write_fixture(target, exchange, {"server": "fake", "scenario": path})
    return through_proxy, target


def _replayed(target: Path, path: str) -> tuple[http.client.HTTPResponse, list[bytes], bool]:
    server = ReplayServer(load(target))
    server.start()
    try:
        return _post(server.url, path)
    finally:
        server.stop()


def test_a_chunked_stream_round_trips_with_its_chunk_boundaries(
    origin: str, tmp_path: Path
) -> None:
    through_proxy, target = _record(origin, "/v1/chat/completions", tmp_path)
    assert through_proxy == list(SSE_CHUNKS)
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["request"]["body_json"] == {"model": "m"}
    assert document["request"]["headers"]["authorization"] == "Bearer <key>", "never the key"
    stored = document["response"]["chunks"]
    assert isinstance(stored[0], dict) and isinstance(stored[1], dict), "split UTF-8 is base64"
    assert stored[2] == ": ping - a comment line\n\n"
    reply, replayed, cut = _replayed(target, "/v1/chat/completions")
    assert replayed == list(SSE_CHUNKS) and not cut
    assert (reply.status, reply.getheader("x-origin")) == (200, "fake")
    assert reply.getheader("content-type") == "text/event-stream"


def test_a_stream_the_server_cut_is_recorded_and_replayed_as_cut(
    origin: str, tmp_path: Path
) -> None:
    _, target = _record(origin, "/v1/cut", tmp_path)
    assert load(target).cut is True
    _, replayed, cut = _replayed(target, "/v1/cut")
    assert replayed == list(SSE_CHUNKS[:2])
    assert cut is True


def test_an_error_with_a_content_length_round_trips(origin: str, tmp_path: Path) -> None:
    through_proxy, target = _record(origin, "/v1/error", tmp_path)
    assert through_proxy == [ERROR]
    recorded = load(target)
    assert (recorded.status, recorded.framing, recorded.body) == (404, "length", ERROR)
    reply, replayed, _ = _replayed(target, "/v1/error")
    assert (reply.status, b"".join(replayed)) == (404, ERROR)
    assert reply.getheader("content-length") == str(len(ERROR))
