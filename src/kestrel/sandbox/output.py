"""A command's output kept in bounded memory: its head and its tail, with a note between.

A command that prints without end (`yes`, a runaway log) would otherwise fill Kestrel's memory
before its deadline; the whole stream still reaches the output sink as it arrives.
"""

from __future__ import annotations

from collections import deque

MAX_OUTPUT_CHARS = 8 * 1024 * 1024
"""How much of a command's output a result keeps, head and tail together."""

BINARY_SNIFF_CHARS = 8192
"""How much of a command's output is checked for NUL characters to call it binary."""


def looks_binary(output: str) -> bool:
    """True when `output` has a NUL character near its start.

    Only that makes output binary: bytes that are not valid UTF-8 were already decoded as
    U+FFFD replacement characters, and the text around them is worth reading.
    """
    return "\0" in output[:BINARY_SNIFF_CHARS]


class OutputBuffer:
    """Keeps the first and the last `limit // 2` characters of everything added."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self._half = max(limit // 2, 1)
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self.total = 0
        """Characters added so far, kept or not."""

    def add(self, text: str) -> None:
        """Add the next piece of output."""
        self.total += len(text)
        room = self._half - self._head_size
        if room > 0:
            self._head.append(text[:room])
            self._head_size += min(room, len(text))
            text = text[room:]
        if not text:
            return
        self._tail.append(text)
        self._tail_size += len(text)
        while self._tail_size - len(self._tail[0]) >= self._half:
            self._tail_size -= len(self._tail.popleft())

    def text(self) -> str:
        """The output kept, with a note where some was left out."""
        head = "".join(self._head)
        tail = "".join(self._tail)
        if len(tail) > self._half:
            tail = tail[-self._half :]
        omitted = self.total - len(head) - len(tail)
        if omitted <= 0:
            return head + tail
        note = f"\n[kestrel: {omitted:,} characters of output left out here]\n"
        return head + note + tail
