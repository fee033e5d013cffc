"""The response cache: keys, replay as stream parts, the replay limit, expiry, and a Redis that
goes away (a miss, never an error)."""

from __future__ import annotations

import time

import pytest
from redis_kit import kill_clients
from tcp_proxy import Relay

from kestrel.models.response_cache import (
    CachingStreamer,
    MemoryResponseCache,
    ResponseCache,
    replay,
    request_key,
)
from kestrel.models.response_cache_redis import RedisResponseCache
from kestrel.protocol.events import ModelRole
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
    UserTurn,
)
from kestrel.redis_link import RedisLink


def request(text: str = "fix the bug", *, temperature: float | None = None) -> ModelRequest:
    spec = ToolSpec(name="read_file", description="Read.", input_schema={"b": 1, "a": 2})
    return ModelRequest(
        system="sys", messages=(UserTurn(text=text),), tools=(spec,), temperature=temperature
    )


def reply(text: str = "looking") -> Completion:
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "a.py"}')
    usage = Usage(model="m", input_tokens=1200, output_tokens=80, cost_usd=0.25)
    return Completion(
        message=AssistantTurn(text=text, tool_calls=(call,)), usage=usage, stop_reason="tool_use"
    )


def test_the_key_covers_session_models_and_every_part_of_the_request() -> None:
    base = request_key("s1", ["a:m"], request())
    assert base == request_key("s1", ["a:m"], request())
    assert base.startswith("s1:")
    others = {
        request_key("s2", ["a:m"], request()),
        request_key("s1", ["a:m", "b:n"], request()),
        request_key("s1", ["a:m"], request("fix the other bug")),
        request_key("s1", ["a:m"], request(temperature=0.5)),
    }
    assert base not in others and len(others) == 4


async def test_a_reply_replays_as_the_parts_a_provider_streams() -> None:
    parts = [part async for part in replay(reply())]
    assert parts[0] == TextDelta(text="looking")
    assert parts[1] == ToolCallDelta(
        index=0, call_id="c1", name="read_file", arguments_delta='{"path": "a.py"}'
    )
    last = parts[-1]
    assert isinstance(last, Completion) and last.cached
    assert last.message == reply().message and last.usage == reply().usage


async def check_replayed_once(cache: ResponseCache) -> None:
    assert await cache.take("s:k") is None
    await cache.keep("s:k", reply())
    assert await cache.take("s:k") == reply()
    assert await cache.take("s:k") is None, "an entry is replayed once, then goes to the model"
    await cache.keep("s:k", reply("again"))
    found = await cache.take("s:k")
    assert found is not None and found.message.text == "again"


async def test_memory_cache_replays_an_entry_once() -> None:
    await check_replayed_once(MemoryResponseCache())


async def test_redis_cache_replays_an_entry_once(link: RedisLink) -> None:
    cache = RedisResponseCache(link)
    try:
        await check_replayed_once(cache)
    finally:
        await cache.close()


async def test_redis_entries_expire(link: RedisLink) -> None:
    cache = RedisResponseCache(link, ttl_s=0.2)
    try:
        await cache.keep("s:k", reply())
        time.sleep(0.4)
        assert await cache.take("s:k") is None
    finally:
        await cache.close()


async def test_two_processes_share_entries_and_the_replay_count(link: RedisLink) -> None:
    first, second = RedisResponseCache(link), RedisResponseCache(link, replays=1)
    try:
        await first.keep("s:k", reply())
        assert await second.take("s:k") == reply()
        assert await first.take("s:k") is None
    finally:
        await first.close()
        await second.close()


class Counting:
    """A streamer that answers every request with `reply()` and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: object, on_switch: object
    ):  # type: ignore[no-untyped-def]
        self.calls += 1
        yield TextDelta(text="looking")
        yield reply()


async def stream_all(streamer: CachingStreamer, req: ModelRequest) -> list[StreamPart]:
    parts = streamer(req, role="main", on_retry=lambda *a: None, on_switch=lambda *a: None)
    return [part async for part in parts]


async def test_the_streamer_keeps_replies_and_replays_an_identical_request(
    link: RedisLink,
) -> None:
    inner = Counting()
    cache = RedisResponseCache(link)
    streamer = CachingStreamer(inner, cache, "s1", lambda role: ("a:m",))  # type: ignore[arg-type]
    try:
        live = await stream_all(streamer, request())
        replayed = await stream_all(streamer, request())
        third = await stream_all(streamer, request())
        other = await stream_all(streamer, request("something else"))
    finally:
        await cache.close()
    assert inner.calls == 3, "the first, the third (replays used up) and the other request"
    assert not any(isinstance(p, Completion) and p.cached for p in live + third + other)
    done = replayed[-1]
    assert isinstance(done, Completion) and done.cached and done.usage == reply().usage


async def test_a_redis_that_is_away_is_a_miss_and_comes_back(
    relayed_link: RedisLink, relay: Relay
) -> None:
    cache = RedisResponseCache(relayed_link)
    try:
        await cache.keep("s:k", reply())
        relay.down()
        started = time.monotonic()
        assert await cache.take("s:k") is None
        await cache.keep("s:other", reply())  # nothing happens, nothing raises
        assert await cache.take("s:k") is None
        assert time.monotonic() - started < 3
        relay.up()
        time.sleep(1.1)  # the pause after a failure
        assert await cache.take("s:k") == reply()
    finally:
        await cache.close()


async def test_connections_cut_by_the_server_are_replaced(link: RedisLink) -> None:
    cache = RedisResponseCache(link)
    try:
        await cache.keep("s:k", reply())
        assert kill_clients(link, "cache") >= 1
        assert await cache.take("s:k") == reply()
    finally:
        await cache.close()


@pytest.mark.parametrize("text", ["", "ünïcödé \u0000 and \ud7ff"])
async def test_replies_survive_the_round_trip(link: RedisLink, text: str) -> None:
    cache = RedisResponseCache(link)
    try:
        await cache.keep("s:k", reply(text))
        assert await cache.take("s:k") == reply(text)
    finally:
        await cache.close()
