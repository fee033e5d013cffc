"""Request rate limits of the hosted API: each tenant's plan may cap its API requests a minute
(`requests_per_minute`), counted across every server process when they share a Redis.

The count is a token bucket per tenant: it holds up to the plan's number of requests, refills
at that number a minute, and each request takes one; a request that finds it empty is answered
429 with a `Retry-After` of when the next one refills. In one process the bucket is in memory
(`LocalRateLimiter`); with `KESTREL_REDIS_URL` it is in Redis (`rate_limit_redis`), where one
script reads, refills and takes atomically, so servers behind a load balancer share it.

Redis away, the limit fails open to each process's own bucket: a tenant is never refused
because Redis is down, and is still held to the plan's rate per process, so with N servers at
most N times the rate gets through until Redis is back.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kestrel.server.accounts import Principal
from kestrel.server.hosting import Hosting, Refusal

WINDOW_S = 60.0
"""The period a plan's request count is given for."""


class RateLimiter(Protocol):
    """Counts requests per key; thread-safe (the API's sync routes run on a thread pool)."""

    def take(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one request under `key`, allowed `limit` per `window_s` seconds: None when it
        may go ahead, else the seconds until it could."""
        ...


def refill(
    tokens: float, then: float, now: float, limit: int, window_s: float
) -> tuple[float, float | None]:
    """A bucket holding `tokens` at time `then`, refilled to `now` and asked for one: the
    tokens left and None, or the tokens (unchanged) and the seconds until one is there."""
    rate = limit / window_s
    tokens = min(float(limit), tokens + max(0.0, now - then) * rate)
    if tokens >= 1.0:
        return tokens - 1.0, None
    return tokens, (1.0 - tokens) / rate


@dataclass(slots=True)
class LocalRateLimiter:
    """A `RateLimiter` in this process's memory."""

    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one request under `key`; None when allowed, else seconds to wait."""
        with self._lock:
            now = self.clock()
            tokens, then = self._buckets.get(key, (float(limit), now))
            left, wait = refill(tokens, then, now, limit, window_s)
            self._buckets[key] = (left, now)
            return wait


def limiter_from_env(env: Mapping[str, str]) -> RateLimiter:
    """In Redis when `KESTREL_REDIS_URL` is set (keys under `KESTREL_REDIS_PREFIX`), else in
    this process."""
    url = env.get("KESTREL_REDIS_URL", "").strip()
    if not url or url.lower() == "none":
        return LocalRateLimiter()
    from kestrel.redis_link import DEFAULT_PREFIX, RedisLink
    from kestrel.server.rate_limit_redis import RedisRateLimiter

    return RedisRateLimiter(RedisLink(url, env.get("KESTREL_REDIS_PREFIX") or DEFAULT_PREFIX))


_made = threading.Lock()


def limiter_of(state: Any, env: Mapping[str, str]) -> RateLimiter:
    """The app's limiter (`state.rate_limiter`), made from `env` on first use."""
    with _made:
        limiter: RateLimiter | None = getattr(state, "rate_limiter", None)
        if limiter is None:
            limiter = limiter_from_env(env)
            state.rate_limiter = limiter
        return limiter


def check_rate(hosting: Hosting, who: Principal, limiter: RateLimiter) -> None:
    """Count the request against the tenant's plan; a 429 `Refusal` when it is over."""
    per_minute = hosting.plan_of(who).requests_per_minute
    if per_minute is None:
        return
    wait = limiter.take(f"tenant:{who.tenant_id}", per_minute, WINDOW_S)
    if wait is None:
        return
    retry_after = max(1, math.ceil(wait))
    raise Refusal(
        429,
        f"tenant is over the {per_minute} requests a minute of its plan; retry in {retry_after}s",
        headers={"Retry-After": str(retry_after)},
    )
