"""Streamed tool output gathered into few events: one per 64 KB or per 100 ms, whichever first.

A command that prints 20 MB arrives in hundreds of thousands of small pipe reads; one event per
read made the session log hundreds of megabytes and every frontend replay slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

from kestrel.protocol.events import Event, ToolOutputChunk

Stream = Literal["stdout", "stderr"]

CHUNK_CHARS = 64 * 1024
"""Output gathered before an event is emitted, at most (one pipe read may exceed it)."""

CHUNK_DELAY_S = 0.1
"""Longest a piece of output waits before it is emitted, so a slow command still streams."""


class OutputCoalescer:
    """Gathers one call's output pieces and emits them as `tool_output_chunk` events.

    Pieces of one stream are joined; a piece of the other stream emits what was gathered first,
    so the order of stdout and stderr is kept. Call `flush` when the call ends.
    """

    def __init__(
        self,
        call_id: str,
        emit: Callable[[Event], object],
        *,
        max_chars: int = CHUNK_CHARS,
        max_delay_s: float = CHUNK_DELAY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._call_id = call_id
        self._emit = emit
        self._max_chars = max_chars
        self._max_delay_s = max_delay_s
        self._clock = clock
        self._stream: Stream = "stdout"
        self._pieces: list[str] = []
        self._size = 0
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._failed: Exception | None = None
        self.emitted = 0
        """Events emitted so far."""

    def add(self, stream: Stream, text: str) -> None:
        """Take the next piece of output; emit when 64 KB or 100 ms have gathered."""
        self._raise_failed()
        if not text:
            return
        if self._pieces and stream != self._stream:
            self.flush()
        if not self._pieces:
            self._stream = stream
            self._since = self._clock()
            self._start_timer()
        self._pieces.append(text)
        self._size += len(text)
        if self._size >= self._max_chars or self._clock() - self._since >= self._max_delay_s:
            self.flush()

    def flush(self) -> None:
        """Emit what has gathered, if anything."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._raise_failed()
        if not self._pieces:
            return
        text = "".join(self._pieces)
        self._pieces, self._size = [], 0
        self.emitted += 1
        self._emit(ToolOutputChunk(call_id=self._call_id, stream=self._stream, text=text))

    def _start_timer(self) -> None:
        # Output that then goes quiet must not wait for the next piece or the call's end.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self._max_delay_s, self._flush_on_timer)

    def _flush_on_timer(self) -> None:
        # An emit that fails here (the event store's disk is full) has no caller to fail: keep
        # the error for the next `add` or `flush`, rather than letting asyncio log a traceback.
        try:
            self.flush()
        except Exception as exc:
            self._failed = exc

    def _raise_failed(self) -> None:
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
