"""A loopback HTTP server that replays scripted provider replies and records what it received."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response; `chunks` stream with chunked encoding when `stream` is set."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    chunks: tuple[bytes, ...] = ()
    stream: bool = False
    drop: bool = False
    """Close the connection after the chunks, without ending the body: a broken stream."""


@dataclass(frozen=True)
class Received:
    """One request the server saw, with lower-cased header names and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-reply is what some tests do on purpose; it is not worth a trace."""

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class WireServer:
    """Serves `Reply` objects in order on 127.0.0.1 and a free port, from a background thread."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        self.pages: dict[str, Reply] = {}
        """GET answers by path (a server's /v1/models, /props); other paths answer 404."""
        self.gets: list[Received] = []
        """The GET requests seen, kept apart from `received` (the model calls)."""
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval keeps shutdown, and so each test's teardown, quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def push(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self.replies.extend(replies)

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            if self.replies:
                return self.replies.popleft()
        return json_reply(599, {"error": "no reply scripted"})


def _handler_for(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            headers = {key.lower(): value for key, value in self.headers.items()}
            with server._lock:
                server.gets.append(Received("GET", self.path, headers, None))
                page = server.pages.get(self.path) or json_reply(404, {"error": "not found"})
            self._send(page)

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            payload = b"".join(reply.chunks)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {key.lower(): value for key, value in self.headers.items()}
            body = json.loads(raw) if raw else None
            reply = server._next(Received("POST", self.path, headers, body))
            if not reply.stream:
                self._send(reply)
                return
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self._send_chunked(reply)

        def _send_chunked(self, reply: Reply) -> None:
            send_chunked(self, reply.chunks, cut=reply.drop)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def send_chunked(handler: BaseHTTPRequestHandler, chunks: Sequence[bytes], *, cut: bool) -> None:
    """Send `chunks` as a chunked body, one flush each; `cut` drops the connection before the
    last-chunk marker, as a server that dies mid-reply does."""
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for chunk in chunks:
        handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        handler.wfile.flush()
    if cut:
        handler.close_connection = True
        return
    handler.wfile.write(b"0\r\n\r\n")


def json_reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
    """A plain JSON response, such as an error."""
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return Reply(status=status, headers=all_headers, chunks=(json.dumps(body).encode(),))


def _sse(frames: list[bytes], drop: bool) -> Reply:
    headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    return Reply(headers=headers, chunks=tuple(frames), stream=True, drop=drop)


def anthropic_sse(events: list[dict[str, Any]], *, drop: bool = False) -> Reply:
    """Anthropic's wire form: `event: <type>` then `data: <json>` for every event."""
    frames = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    return _sse(frames, drop)


def openai_sse(chunks: list[dict[str, Any]], *, done: bool = True) -> Reply:
    """OpenAI's wire form: `data: <chunk json>` lines, then `data: [DONE]`."""
    frames = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
    if done:
        frames.append(b"data: [DONE]\n\n")
    return _sse(frames, drop=False)


# Anthropic event builders, shaped like the Messages API's streaming reference.


def claude_start(
    model: str, *, input_tokens: int = 10, cache_write: int = 0, cache_read: int = 0
) -> dict[str, Any]:
    """A `message_start` event with the input side of usage."""
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return {"type": "message_start", "message": message}


def claude_text(index: int, *parts: str) -> list[dict[str, Any]]:
    """A text content block streamed in `parts`."""
    start = {"type": "content_block_start", "index": index}
    start["content_block"] = {"type": "text", "text": ""}
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
        for p in parts
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def claude_tool(index: int, call_id: str, name: str, *json_parts: str) -> list[dict[str, Any]]:
    """A tool_use content block whose input streams as `input_json_delta` pieces."""
    start = {"type": "content_block_start", "index": index}
    start["content_block"] = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    deltas = [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": part},
        }
        for part in json_parts
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def claude_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> list[dict[str, Any]]:
    """`message_delta` with the stop reason and output usage, then `message_stop`."""
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }
    return [delta, {"type": "message_stop"}]


def claude_error(kind: str, message: str) -> dict[str, Any]:
    """The error body Anthropic sends, as an HTTP body or as an `event: error` in a stream."""
    return {"type": "error", "error": {"type": kind, "message": message}}


# OpenAI chunk builders, shaped like `chat.completion.chunk` objects.


def gpt_chunk(
    delta: dict[str, Any], finish_reason: str | None = None, model: str = "gpt-4o"
) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion.chunk",
        "created": 1_718_000_000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [choice],
        "usage": None,
    }


def gpt_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """The final chunk `include_usage` asks for: empty choices, usage filled in."""
    chunk = gpt_chunk({})
    chunk["choices"] = []
    chunk["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    return chunk


def gpt_tool_delta(
    index: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """A delta carrying one piece of one tool call; id and name come on the first piece only."""
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
        call["function"]["name"] = name
    return {"tool_calls": [call]}


class SleepRecorder:
    """Stands in for `asyncio.sleep`: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    """Every part of a stream, in order."""
    return [part async for part in stream]


def closed_port() -> int:
    """A loopback port nothing listens on, for connection-refused tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def serving() -> Iterator[WireServer]:
    """A started wire server, stopped when the generator closes (the body of a fixture)."""
    server = WireServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def model_list(owned_by: str, model: str = "local-model", **headers: str) -> Reply:
    """A /v1/models answer listing one model, as each server writes it."""
    body = {"object": "list", "data": [{"id": model, "object": "model", "owned_by": owned_by}]}
    return json_reply(200, body, headers)


def gpt_whole(
    content: str | None = None,
    tool_calls: tuple[tuple[str, str, str], ...] = (),
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = (20, 5),
) -> Reply:
    """A non-streamed `chat.completion`; `tool_calls` are (id, name, arguments JSON)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in tool_calls
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-whole",
        "object": "chat.completion",
        "created": 1_718_000_000,
        "model": "local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return json_reply(200, body)
