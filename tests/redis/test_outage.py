"""Redis away for 10 s while a session logs events: appends never wait for it, followers keep
getting every record from the log's poll, the cache misses, and when Redis is back the records
are carried through it again; no error is raised or printed."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from fanout_kit import Collector, CountingLog, say, start, writer
from tcp_proxy import Relay

from kestrel.models.response_cache_redis import RedisResponseCache
from kestrel.redis_link import RedisLink
from kestrel.service.events import Fanout
from kestrel.service.events_redis import RedisCarrier
from kestrel.store.redis_publish import PublishingStore
from kestrel.store.sqlite import SQLiteStore

OUTAGE_S = 10.0
EVERY_S = 0.05


async def append_for(seconds: float, session: PublishingStore, slowest: list[float]) -> None:
    """Append a record every `EVERY_S` for `seconds`, noting the slowest append."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        say(session, "s1", 1)
        slowest[0] = max(slowest[0], time.monotonic() - started)
        await asyncio.sleep(EVERY_S)


async def test_followers_go_on_through_a_redis_outage(
    tmp_path: Path,
    relayed_link: RedisLink,
    relay: Relay,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.WARNING)
    db = tmp_path / "log.db"
    session = writer(db, relayed_link)
    start(session, "s1")
    log = CountingLog(SQLiteStore(db))
    # Polled every 50 ms while Redis is away, and never while it carries.
    fanout = Fanout(log, poll_s=0.05, carrier=RedisCarrier(relayed_link), carried_poll_s=3600)
    fanout.start()
    follower = Collector(fanout, "s1").begin()
    cache = RedisResponseCache(relayed_link)
    slowest = [0.0]
    try:
        await follower.until(1)
        await append_for(1.0, session, slowest)
        relay.down()
        await append_for(OUTAGE_S / 2, session, slowest)
        assert await cache.take("s1:any") is None
        await append_for(OUTAGE_S / 2, session, slowest)
        logged = len(log.inner.read("s1"))
        assert len(await follower.until(logged - 5, timeout_s=2)) >= logged - 5
        relay.up()
        await append_for(3.0, session, slowest)
        reads_when_back = log.reads
        await append_for(1.0, session, slowest)
        total = len(log.inner.read("s1"))
        assert await follower.until(total, timeout_s=5) == list(range(1, total + 1))
        # Back on Redis: the last second's records were carried, not read from the log.
        assert log.reads - reads_when_back <= 2
    finally:
        await follower.end()
        await fanout.stop()
        await cache.close()
        session.close()
        log.inner.close()
    assert slowest[0] < 0.5, f"an append waited {slowest[0]:.2f}s for Redis"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "Traceback" not in capfd.readouterr().err
