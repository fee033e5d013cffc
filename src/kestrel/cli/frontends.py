"""Frontends that read a session's events as they are logged: the base, and the two headless
ones (`stream-json` prints every record; the others print at the end)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import TextIO

from kestrel.protocol.codec import record_to_json
from kestrel.protocol.events import ApprovalRequested, BudgetNotice, Record


def shorten(text: str, limit: int = 120) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Frontend:
    """Consumes records in order and remembers how far it got."""

    def __init__(self) -> None:
        self.seen_seq = 0
        self.closed = False
        self._progress = asyncio.Condition()

    async def consume(self, records: AsyncIterator[Record]) -> None:
        """Render every record as it arrives, until cancelled or the output is gone.

        A closed output (a reader that went away) stops the rendering, never the session:
        the log keeps every event either way.
        """
        try:
            async for record in records:
                self.render(record)
                self.seen_seq = record.seq
                async with self._progress:
                    self._progress.notify_all()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.closed = True
            async with self._progress:
                self._progress.notify_all()

    async def caught_up(self, seq: int) -> None:
        """Wait until every record up to `seq` has been rendered (or rendering has stopped)."""
        async with self._progress:
            await self._progress.wait_for(lambda: self.closed or self.seen_seq >= seq)

    def render(self, record: Record) -> None:
        """Show one record."""


class StreamJsonFrontend(Frontend):
    """One JSON record per line, as it happens: the `stream-json` output format."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        super().__init__()
        self._out = out

    def render(self, record: Record) -> None:
        """Print the record's versioned JSON form."""
        self._out.write(record_to_json(record) + "\n")
        self._out.flush()


class QuietFrontend(Frontend):
    """Prints nothing on stdout while the session runs (`text` and `json` output print at the
    end); a budget that cannot be enforced as set is said on stderr, and so is a permission
    question the run waits on (`waits`: it waits for answers from the log)."""

    def __init__(self, err: TextIO | None = None, *, waits: bool = False) -> None:
        super().__init__()
        self._err = err
        self._waits = waits

    def render(self, record: Record) -> None:
        """Warn on stderr about a budget notice or an open question; the rest waits."""
        event = record.event
        if isinstance(event, BudgetNotice):
            self._say(f"kestrel: warning: {event.detail}")
        elif isinstance(event, ApprovalRequested) and self._waits:
            self._say(
                f"kestrel: waiting for approval: {event.name} {shorten(event.arguments)} "
                f"({event.reason}); answer with: kestrel approve {record.session_id} "
                '[--always | --deny -m "why"]'
            )

    def _say(self, line: str) -> None:
        err = self._err or sys.stderr
        err.write(line + "\n")
        err.flush()
