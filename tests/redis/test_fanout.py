"""Live fan-out through Redis streams: records appended by a session's process reach the
server's followers through Redis, in order, and the log fills every gap Redis leaves."""

from __future__ import annotations

from pathlib import Path

import redis
from fanout_kit import Collector, CountingLog, carried_fanout, say, start, writer
from redis_kit import REDIS_URL, kill_clients

from kestrel.redis_link import RedisLink
from kestrel.store.redis_publish import STREAM_LENGTH, stream_key
from kestrel.store.sqlite import SQLiteStore


async def test_records_are_carried_by_redis_not_read_from_the_log(
    tmp_path: Path, link: RedisLink
) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    start(session, "s1")
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, link)
    fanout.start()
    follower = Collector(fanout, "s1").begin()
    try:
        await follower.until(1)
        say(session, "s1", 40)
        assert await follower.until(41) == list(range(1, 42))
        assert log.reads <= 3, "read to catch up at the start, not for each carried record"
    finally:
        await follower.end()
        await fanout.stop()
        session.close()
        log.inner.close()


async def test_streams_are_capped_and_expire(tmp_path: Path, link: RedisLink) -> None:
    session = writer(tmp_path / "log.db", link)
    start(session, "s1")
    say(session, "s1", STREAM_LENGTH * 2)
    session.close()  # sends what is queued
    client = redis.Redis.from_url(REDIS_URL)
    key = stream_key(link, "s1")
    assert STREAM_LENGTH <= client.xlen(key) < STREAM_LENGTH * 1.5
    assert 0 < client.ttl(key) <= 600
    client.close()


async def test_a_record_redis_never_got_is_read_from_the_log_at_the_gap(
    tmp_path: Path, link: RedisLink
) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    unpublished = SQLiteStore(db)  # as a process without Redis settings would append
    start(session, "s1")
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, link)
    fanout.start()
    follower = Collector(fanout, "s1").begin()
    try:
        await follower.until(1)
        say(unpublished, "s1", 2)
        say(session, "s1", 1)  # carried with seq 4 while the follower is at 1
        assert await follower.until(4) == [1, 2, 3, 4]
    finally:
        await follower.end()
        await fanout.stop()
        session.close()
        unpublished.close()
        log.inner.close()


async def test_reconnecting_with_the_last_event_id_loses_nothing(
    tmp_path: Path, link: RedisLink
) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    start(session, "s1")
    say(session, "s1", 9)
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, link)
    fanout.start()
    first = Collector(fanout, "s1").begin()
    try:
        await first.until(10)
        await first.end()
        say(session, "s1", 5)  # while nobody follows
        again = Collector(fanout, "s1", after=7).begin()
        await again.until(8)
        say(session, "s1", 3)
        assert await again.until(11) == list(range(8, 19))
        await again.end()
    finally:
        await fanout.stop()
        session.close()
        log.inner.close()


async def test_a_follower_that_falls_behind_reads_the_rest_from_the_log(
    tmp_path: Path, link: RedisLink
) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    start(session, "s1")
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, link)
    fanout.start()
    follower = Collector(fanout, "s1").begin()
    try:
        await follower.until(1)
        say(session, "s1", 1000)  # more than a follower holds, before it can take any
        assert await follower.until(1001) == list(range(1, 1002))
    finally:
        await follower.end()
        await fanout.stop()
        session.close()
        log.inner.close()


async def test_connections_cut_by_the_server_lose_nothing(tmp_path: Path, link: RedisLink) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    start(session, "s1")
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, link)
    fanout.start()
    follower = Collector(fanout, "s1").begin()
    try:
        await follower.until(1)
        say(session, "s1", 10)
        await follower.until(11)
        assert kill_clients(link, "fanout") >= 1
        assert kill_clients(link, "publish") >= 1
        for _ in range(10):
            say(session, "s1", 2)
            await follower.until(len(follower.seqs) + 2)
        assert follower.seqs == list(range(1, 32))
    finally:
        await follower.end()
        await fanout.stop()
        session.close()
        log.inner.close()
