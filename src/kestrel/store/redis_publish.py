"""Every appended record also goes to a Redis stream of its session, so the followers of any
server process learn of it at once, wherever the session runs.

The log stays the truth: a record is published only once `append` has made it durable, from a
thread of its own, so a slow or absent Redis never slows a session down. A record Redis does
not get is lost only to the live view's speed: followers poll the log as well, and a follower
that sees a gap in the stream's numbers reads the log. Each stream is capped
(`STREAM_LENGTH` entries, trimmed approximately) and expires `STREAM_TTL_S` after its last
record: a reconnecting client resumes from the log, never from Redis.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from kestrel.protocol.codec import record_to_json
from kestrel.redis_link import REDIS_ERRORS, Breaker, RedisLink
from kestrel.store.base import EventStore, SessionSummary, Spend

if TYPE_CHECKING:
    import redis
    from redis.typing import EncodableT, FieldT

    from kestrel.protocol.events import Event, Record

STREAM_LENGTH = 2000
"""Entries a session's stream keeps: enough for a burst of streamed text, small in memory."""
STREAM_TTL_S = 600
"""A stream vanishes this long after its session's last record."""
BATCH = 256
"""Records sent in one round trip at most."""
CLOSE_WAIT_S = 2.0
"""How long closing the store waits for records still on their way to Redis."""


def stream_key(link: RedisLink, session_id: str) -> str:
    """The Redis stream of a session's records."""
    return link.key("events", session_id)


class Publisher:
    """Sends records to their sessions' streams from a background thread."""

    def __init__(self, link: RedisLink) -> None:
        """Publish under `link`'s prefix; the thread starts with the first record."""
        self._link = link
        self._queue: queue.SimpleQueue[Record | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._breaker = Breaker()
        self.sent = 0
        """Records Redis accepted, for tests and benchmarks."""

    def publish(self, record: Record) -> None:
        """Queue `record` for its stream; returns at once."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kestrel-redis-publish", daemon=True
                )
                self._thread.start()
        self._queue.put(record)

    def close(self) -> None:
        """Send what is queued (waiting `CLOSE_WAIT_S` at most), then stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(CLOSE_WAIT_S)

    def _run(self) -> None:
        client = self._link.sync_client("publish")
        try:
            while True:
                batch, done = self._next_batch()
                if batch and not self._breaker.open:
                    self._send(client, batch)
                if done:
                    return
        finally:
            client.close()

    def _next_batch(self) -> tuple[list[Record], bool]:
        batch: list[Record] = []
        item = self._queue.get()
        while item is not None:
            batch.append(item)
            if len(batch) >= BATCH:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
        return batch, True

    def _send(self, client: redis.Redis, batch: list[Record]) -> None:
        pipe = client.pipeline(transaction=False)
        keys = set()
        for record in batch:
            key = stream_key(self._link, record.session_id)
            keys.add(key)
            entry: dict[FieldT, EncodableT] = {"seq": record.seq, "r": record_to_json(record)}
            pipe.xadd(key, entry, maxlen=STREAM_LENGTH, approximate=True)
        for key in keys:
            pipe.expire(key, STREAM_TTL_S)
        try:
            pipe.execute()
        except REDIS_ERRORS:
            self._breaker.failed()  # Those records stay in the log; followers poll it.
            return
        self._breaker.succeeded()
        self.sent += len(batch)


class PublishingStore:
    """An `EventStore` that publishes each record it appends; everything else is `inner`'s."""

    def __init__(self, inner: EventStore, publisher: Publisher) -> None:
        """Append to `inner`, then hand the record to `publisher`."""
        self.inner = inner
        self.publisher = publisher

    def append(self, session_id: str, event: Event) -> Record:
        """Append to the log; once it is durable, publish it."""
        record = self.inner.append(session_id, event)
        self.publisher.publish(record)
        return record

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """The log's records after `after_seq`."""
        return self.inner.read(session_id, after_seq)

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """The log's records after `after_seq`, then new ones, as the log delivers them."""
        return self.inner.subscribe(session_id, after_seq)

    def sessions(self) -> Sequence[SessionSummary]:
        """Every session of the log."""
        return self.inner.sessions()

    def spent_since(self, since: float) -> Spend:
        """The log's spend since `since`."""
        return self.inner.spent_since(since)

    def resolve(self, id_or_prefix: str) -> str:
        """The full id of the session `id_or_prefix` names."""
        return self.inner.resolve(id_or_prefix)

    def close(self) -> None:
        """Send the records still queued, then close the log."""
        self.publisher.close()
        self.inner.close()
