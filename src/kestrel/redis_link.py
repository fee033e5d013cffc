"""Connections to Redis for the parts of cluster mode that use it: the response cache, live
fan-out of events between processes and the hosted API's rate-limit counters.

Redis only ever helps: the event log and the database stay the truth, so every caller treats a
Redis that does not answer as a miss and goes on without it. Clients here fail fast (one quick
reconnect, a one-second timeout), and a `Breaker` stops a caller from paying even that on every
call while Redis is away. Each client has a name (`<prefix><role>`) so an operator, or a test,
can find its connections with `CLIENT LIST`.

Imported only when `redis_url` is set: the `redis` package comes with the `cluster` extra.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, OSError)
"""What a call to a Redis that went away, or never came, raises."""

TIMEOUT_S = 1.0
"""How long one command or connection attempt may take before it counts as a failure."""

DEFAULT_PREFIX = "kestrel:"
"""The prefix of every key Kestrel writes, unless `redis_prefix` says otherwise."""


@dataclass(frozen=True, slots=True)
class RedisLink:
    """Where Redis is and how Kestrel's keys there are named."""

    url: str
    prefix: str = DEFAULT_PREFIX

    def key(self, *parts: str) -> str:
        """A key under the prefix: `key("events", sid)` is `<prefix>events:<sid>`."""
        return self.prefix + ":".join(parts)

    def client_name(self, role: str) -> str:
        """The name a client of `role` gives itself (no spaces, as Redis requires)."""
        return re.sub(r"[^A-Za-z0-9:._-]", "_", f"{self.prefix}{role}")

    def sync_client(self, role: str) -> redis.Redis:
        """A blocking client, for threads and sync code (the publisher, the rate limiter)."""
        return redis.Redis.from_url(
            self.url,
            client_name=self.client_name(role),
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 1),
        )

    def async_client(self, role: str, *, read_timeout_s: float = TIMEOUT_S) -> redis.asyncio.Redis:
        """A client for the event loop; `read_timeout_s` must outlast any blocking read."""
        return redis.asyncio.Redis.from_url(
            self.url,
            client_name=self.client_name(role),
            socket_timeout=read_timeout_s,
            socket_connect_timeout=TIMEOUT_S,
            retry=AsyncRetry(NoBackoff(), 1),
        )


class Breaker:
    """After a failure, say "skip Redis" for `pause_s`; then let one call through to try again.

    A session appends many events a second and asks the cache before every model call: while
    Redis is away each of them would otherwise wait for its own failed connection."""

    def __init__(self, pause_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        """Pause `pause_s` seconds after each failure, measured by `clock`."""
        self._pause_s = pause_s
        self._clock = clock
        self._until = 0.0

    @property
    def open(self) -> bool:
        """True while calls should skip Redis."""
        return self._clock() < self._until

    def failed(self) -> None:
        """A call failed: skip Redis for a while."""
        self._until = self._clock() + self._pause_s

    def succeeded(self) -> None:
        """A call got through: use Redis again at once."""
        self._until = 0.0
