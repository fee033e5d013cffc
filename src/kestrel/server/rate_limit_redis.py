"""The hosted API's request counts in Redis, shared by every server process.

One script refills and takes from a tenant's bucket (a hash of `tokens` and `at`, in the
Redis server's own time, so servers whose clocks differ still agree) and says how long to
wait when it is empty. Redis away: the process's own bucket answers instead (fail open to a
per-process limit), until a call gets through again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.redis_link import REDIS_ERRORS, Breaker, RedisLink
from kestrel.server.rate_limit import LocalRateLimiter

if TYPE_CHECKING:
    import redis

_FAILURES: tuple[type[Exception], ...] = (*REDIS_ERRORS, ValueError)
"""Redis away, or an answer that is not a number."""

_TAKE = """
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1]) or limit
local at = tonumber(held[2]) or now
local rate = limit / window
tokens = math.min(limit, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return tostring(wait)
"""
"""Refill the bucket to now, take one request if there is one; the seconds to wait, or 0."""


class RedisRateLimiter:
    """A `RateLimiter` in Redis, falling back to this process's count while Redis is away."""

    def __init__(self, link: RedisLink) -> None:
        """Count under `link`'s prefix (`<prefix>rate:<key>`)."""
        self._link = link
        self._client: redis.Redis | None = None
        self._breaker = Breaker()
        self.fallback = LocalRateLimiter()
        """The per-process count used while Redis does not answer."""

    def _redis(self) -> redis.Redis:
        if self._client is None:
            self._client = self._link.sync_client("ratelimit")
        return self._client

    def take(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one request under `key`; None when allowed, else seconds to wait."""
        if self._breaker.open:
            return self.fallback.take(key, limit, window_s)
        try:
            reply = self._redis().eval(_TAKE, 1, self._link.key("rate", key), limit, window_s)
            wait = float(reply.decode() if isinstance(reply, bytes) else str(reply))
        except _FAILURES:
            self._breaker.failed()
            return self.fallback.take(key, limit, window_s)
        self._breaker.succeeded()
        return wait if wait > 0 else None

    def close(self) -> None:
        """Release the connections."""
        if self._client is not None:
            self._client.close()
            self._client = None
