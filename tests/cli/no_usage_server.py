"""A loopback OpenAI-wire chat server that, like some llama.cpp builds, never reports usage.

It answers `POST /v1/chat/completions` from a list of turns (a tool call or plain text), streamed
as Server-Sent Events or whole, and never includes a `usage` block; every GET answers 404, as a
server without `/v1/models` does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Turn = dict[str, Any]
"""`{"text": "..."}` or `{"tool": "name", "arguments": {...}}`."""


def _delta_chunks(turn: Turn, index: int) -> list[dict[str, Any]]:
    """The streamed chunks of one turn, without usage."""
    base = {"id": f"chatcmpl-{index}", "object": "chat.completion.chunk", "created": 1}
    base["model"] = "my-local-model"
    if "tool" in turn:
        call = {
            "index": 0,
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": turn["tool"], "arguments": json.dumps(turn["arguments"])},
        }
        delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": turn["text"]}
        finish = "stop"
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]


def _whole(turn: Turn, index: int) -> dict[str, Any]:
    """The same turn as one non-streamed completion, without usage."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("text")}
    finish = "stop"
    if "tool" in turn:
        function = {"name": turn["tool"], "arguments": json.dumps(turn["arguments"])}
        message["tool_calls"] = [{"id": f"call_{index}", "type": "function", "function": function}]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": 1,
        "model": "my-local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


class NoUsageServer:
    """Serves `next_turn(n)` for the n-th chat request (from 0) on 127.0.0.1 and a free port."""

    def __init__(self, next_turn: Callable[[int], Turn]) -> None:
        self.next_turn = next_turn
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL a client puts before `/chat/completions`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> NoUsageServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def turn_for(self, body: dict[str, Any]) -> tuple[Turn, int]:
        """Record a request and pick its turn."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
        return self.next_turn(index), index


def _handler_for(server: NoUsageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._send(404, "application/json", b'{"error": "not found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            turn, index = server.turn_for(body)
            if not body.get("stream"):
                self._send(200, "application/json", json.dumps(_whole(turn, index)).encode())
                return
            frames = [f"data: {json.dumps(chunk)}\n\n" for chunk in _delta_chunks(turn, index)]
            payload = ("".join(frames) + "data: [DONE]\n\n").encode()
            self._send(200, "text/event-stream", payload)

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
