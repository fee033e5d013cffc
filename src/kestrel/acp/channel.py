"""The protocol's channel: JSON-RPC messages, one a line, on standard input and output.

Standard output belongs to the protocol alone. Before anything else runs, its file descriptor
is moved aside for the protocol, and descriptor 1 is pointed at standard error: a stray print,
a library's warning or a child process that writes to "standard output" then lands in the log
instead of corrupting the stream.

A line that is not JSON, or not a JSON-RPC message, is answered with the JSON-RPC error for it
(parse error, invalid request) and the channel goes on reading.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import IO, Any

logger = logging.getLogger(__name__)

LINE_LIMIT = 64 * 1024 * 1024
"""The longest message read (a prompt may embed whole files)."""
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def claim_stdout() -> IO[bytes]:
    """Standard output for the protocol only; everything else written to it goes to stderr."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "wb", buffering=0)


class _WriteProtocol(asyncio.BaseProtocol):
    """Flow control for the output pipe: writers wait while the editor is behind."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.lost = False

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drained(self) -> None:
        if self._resumed is not None:
            await self._resumed


class LineChannel:
    """A JSON-RPC message transport over newline-delimited JSON on two pipes."""

    def __init__(
        self, reader: asyncio.StreamReader, out: asyncio.WriteTransport, flow: _WriteProtocol
    ) -> None:
        self._reader = reader
        self._out = out
        self._flow = flow
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line."""
        line = json.dumps(message, ensure_ascii=False, default=str, separators=(",", ":"))
        async with self._lock:
            if self._flow.lost or self._out.is_closing():
                raise ConnectionError("the editor closed the connection")
            self._out.write(line.encode("utf-8") + b"\n")
            await self._flow.drained()

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message; None at the end of input. Malformed ones are
        answered with an error here and skipped."""
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # Longer than the limit: what was read of it is dropped.
                await self._error(None, INVALID_REQUEST, "message too long")
                continue
            if not line:
                return None
            if not line.strip():
                continue
            message = await self._checked(line)
            if message is not None:
                return message

    async def close(self) -> None:
        """Stop writing."""
        self._out.close()

    async def _checked(self, line: bytes) -> dict[str, Any] | None:
        try:
            message = json.loads(line)
        except ValueError:
            await self._error(None, PARSE_ERROR, "Parse error", "the line is not valid JSON")
            return None
        if not isinstance(message, dict):
            what = "batches are not supported" if isinstance(message, list) else "not an object"
            await self._error(None, INVALID_REQUEST, "Invalid request", what)
            return None
        ident = message.get("id")
        well_formed = (
            message.get("jsonrpc") == "2.0"
            and (ident is None or isinstance(ident, str | int))
            and (isinstance(message.get("method"), str) or "id" in message)
        )
        if not well_formed:
            valid_id = ident if isinstance(ident, str | int) else None
            why = "expected a JSON-RPC 2.0 request, notification or response"
            await self._error(valid_id, INVALID_REQUEST, "Invalid request", why)
            return None
        return message

    async def _error(self, ident: str | int | None, code: int, text: str, why: str = "") -> None:
        logger.warning("ignored a malformed message: %s", why or text)
        error: dict[str, Any] = {"code": code, "message": text}
        if why:
            error["data"] = {"details": why}
        await self.send({"jsonrpc": "2.0", "id": ident, "error": error})


async def open_channel(out: IO[bytes]) -> LineChannel:
    """The channel on standard input and `out` (see `claim_stdout`)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, flow = await loop.connect_write_pipe(_WriteProtocol, out)
    return LineChannel(reader, transport, flow)
