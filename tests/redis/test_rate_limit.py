"""Request rate limits: a token bucket per tenant, in memory or in Redis where every process
shares it, failing open to each process's own bucket while Redis is away."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from redis_kit import REDIS_URL
from tcp_proxy import Relay

from kestrel.redis_link import RedisLink
from kestrel.server.plans import PlanError, plans_from_mapping
from kestrel.server.rate_limit import LocalRateLimiter, limiter_from_env, refill
from kestrel.server.rate_limit_redis import RedisRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_a_burst_then_one_request_per_refill() -> None:
    clock = Clock()
    limiter = LocalRateLimiter(clock=clock)
    assert [limiter.take("t", 3, 60.0) for _ in range(3)] == [None, None, None]
    wait = limiter.take("t", 3, 60.0)
    assert wait == pytest.approx(20.0)
    clock.now += 10
    assert limiter.take("t", 3, 60.0) == pytest.approx(10.0)
    clock.now += 10
    assert limiter.take("t", 3, 60.0) is None
    assert limiter.take("other", 3, 60.0) is None, "each key has its own bucket"


def test_refill_never_holds_more_than_the_limit() -> None:
    tokens, wait = refill(0.0, 0.0, 10_000.0, 5, 60.0)
    assert (tokens, wait) == (4.0, None)


def test_plans_take_a_request_rate() -> None:
    base = {"tier": 0, "max_concurrent_sessions": 1, "max_queued_sessions": 0, "max_wall_s": 60}
    plan = plans_from_mapping({"p": {**base, "requests_per_minute": 30}})["p"]
    assert plan.requests_per_minute == 30
    assert plans_from_mapping({"p": base})["p"].requests_per_minute is None
    with pytest.raises(PlanError, match="requests_per_minute must be at least 1"):
        plans_from_mapping({"p": {**base, "requests_per_minute": 0}})


def test_without_redis_the_count_is_the_process_own() -> None:
    assert isinstance(limiter_from_env({}), LocalRateLimiter)
    assert isinstance(limiter_from_env({"KESTREL_REDIS_URL": "none"}), LocalRateLimiter)
    made = limiter_from_env({"KESTREL_REDIS_URL": REDIS_URL, "KESTREL_REDIS_PREFIX": "x:"})
    assert isinstance(made, RedisRateLimiter)


def test_redis_bucket_refuses_past_the_limit(link: RedisLink) -> None:
    limiter = RedisRateLimiter(link)
    try:
        assert [limiter.take("t", 5, 60.0) for _ in range(5)] == [None] * 5
        wait = limiter.take("t", 5, 60.0)
        assert wait is not None and 0 < wait <= 12
        assert limiter.take("other", 5, 60.0) is None
    finally:
        limiter.close()


TAKER = """
import sys
from kestrel.redis_link import RedisLink
from kestrel.server.rate_limit_redis import RedisRateLimiter
limiter = RedisRateLimiter(RedisLink(sys.argv[1], sys.argv[2]))
allowed = sum(limiter.take("tenant:t", 20, 3600.0) is None for _ in range(20))
print(allowed)
"""


def test_processes_share_one_count(link: RedisLink) -> None:
    argv = [sys.executable, "-c", TAKER, REDIS_URL, link.prefix]
    takers = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    allowed = [int(p.communicate(timeout=60)[0]) for p in takers]
    assert sum(allowed) == 20, allowed


def test_redis_away_fails_open_to_the_process_own_count(
    relayed_link: RedisLink, relay: Relay
) -> None:
    limiter = RedisRateLimiter(relayed_link)
    try:
        assert limiter.take("t", 3, 60.0) is None
        relay.down()
        started = time.monotonic()
        answers = [limiter.take("t", 3, 60.0) for _ in range(4)]
        assert time.monotonic() - started < 3
        assert answers[:3] == [None, None, None] and answers[3] is not None
        relay.up()
        time.sleep(1.1)  # the pause after a failure
        # Redis's bucket again, which kept the request made before the outage: two left.
        assert [limiter.take("t", 3, 60.0) for _ in range(2)] == [None, None]
        wait = limiter.take("t", 3, 60.0)
        assert wait is not None, "back on the shared count, which kept its earlier requests"
    finally:
        limiter.close()
