"""The fan-out's carrier in Redis: the records sessions publish to their streams
(`kestrel.store.redis_publish`) read by every server process, so a browser connected to one
server sees a session that runs behind another, as it is logged.

One task per process reads the streams of every followed session with one blocking `XREAD`.
A session starts being read from its stream's newest entry at the moment its first follower
arrives, before that follower reads the log, so nothing logged in between is missed; what is
read twice is dropped by its number. Redis away: `health(False)`, a pause, and the fan-out
polls the log meanwhile; back: `health(True)` and every follower reads the log once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from kestrel.protocol.codec import DecodeError, record_from_json
from kestrel.protocol.events import Record
from kestrel.redis_link import REDIS_ERRORS, RedisLink
from kestrel.store.redis_publish import stream_key

if TYPE_CHECKING:
    import redis.asyncio

BLOCK_S = 0.25
"""How long one read waits for new entries; a session followed meanwhile joins the next one."""
PAUSE_S = 0.5
"""The wait after a failed read before the next try."""
COUNT = 512
"""Entries one read takes at most per stream."""


class RedisCarrier:
    """A `Carrier` reading the sessions' Redis streams."""

    def __init__(self, link: RedisLink, *, block_s: float = BLOCK_S) -> None:
        """Read streams under `link`'s prefix, waiting up to `block_s` per read."""
        self._link = link
        self._block_s = block_s
        self._ids: dict[str, Any] = {}
        """Each read session's last entry id read."""
        self._client: redis.asyncio.Redis | None = None
        self._closed = False

    def _redis(self) -> redis.asyncio.Redis:
        if self._client is None:
            self._client = self._link.async_client("fanout", read_timeout_s=self._block_s + 2)
        return self._client

    async def mark(self, session_id: str) -> None:
        """Read the session's stream from its newest entry on; left to the reading task when
        Redis does not answer."""
        if session_id in self._ids:
            return
        try:
            await self._mark(session_id)
        except REDIS_ERRORS:
            _raise_if_cancelled()

    async def _mark(self, session_id: str) -> None:
        newest: Any = await self._redis().xrevrange(stream_key(self._link, session_id), count=1)
        self._ids.setdefault(session_id, newest[0][0] if newest else b"0-0")

    def forget(self, session_id: str) -> None:
        """Stop reading the session's stream."""
        self._ids.pop(session_id, None)

    async def run(
        self,
        sessions: Callable[[], Collection[str]],
        deliver: Callable[[str, list[Record]], None],
        health: Callable[[bool], None],
    ) -> None:
        """Deliver each followed session's new records until cancelled or closed."""
        while not self._closed:
            _raise_if_cancelled()
            watched = list(sessions())
            if not watched:
                await asyncio.sleep(self._block_s)
                continue
            try:
                reply = await self._read(watched)
            except REDIS_ERRORS:
                _raise_if_cancelled()
                health(False)
                await asyncio.sleep(PAUSE_S)
                continue
            health(True)
            for session_id, records in reply.items():
                deliver(session_id, records)

    async def _read(self, watched: list[str]) -> dict[str, list[Record]]:
        for session_id in watched:
            if session_id not in self._ids:
                await self._mark(session_id)
        by_key = {stream_key(self._link, s): s for s in watched if s in self._ids}
        streams: dict[Any, Any] = {key: self._ids[s] for key, s in by_key.items()}
        reply: Any = await self._redis().xread(
            streams, count=COUNT, block=max(1, int(self._block_s * 1000))
        )
        found: dict[str, list[Record]] = {}
        for key, entries in reply or ():
            followed = by_key.get(key.decode() if isinstance(key, bytes) else str(key))
            if followed is None or followed not in self._ids or not entries:
                continue  # Forgotten while the read waited.
            self._ids[followed] = entries[-1][0]
            found[followed] = _records(entries)
        return found

    async def close(self) -> None:
        """Stop reading and release the connections."""
        self._closed = True
        if self._client is not None:
            with contextlib.suppress(*REDIS_ERRORS):
                await self._client.aclose()
            self._client = None


def _raise_if_cancelled() -> None:
    """Go on being cancelled: the client may report a read cut short by a cancellation as a
    lost connection, which would otherwise keep the task alive."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _records(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> list[Record]:
    """The records of stream entries; one that does not decode is left out, and the gap it
    leaves in the numbers sends its followers to the log."""
    records = []
    for _, fields in entries:
        try:
            records.append(record_from_json(fields[b"r"].decode()))
        except (KeyError, UnicodeDecodeError, DecodeError):
            continue
    return records
