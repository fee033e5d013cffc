"""The response cache in Redis, shared by every process that may run a session: the one that
resumes it after a crash is usually not the one that was killed.

Each entry is a hash under `<prefix>reply:<session>:<digest>` with the reply (`c`) and how often
it was replayed (`n`), expiring with the cache's time to live. Taking an entry counts the replay
and checks the limit in one script, so two processes cannot both replay the last one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.models.response_cache import DEFAULT_TTL_S, decode_completion, encode_completion
from kestrel.protocol.messages import Completion
from kestrel.redis_link import REDIS_ERRORS, Breaker, RedisLink

if TYPE_CHECKING:
    import redis.asyncio

_TAKE = """
local reply = redis.call('HGET', KEYS[1], 'c')
if not reply then return false end
local served = redis.call('HINCRBY', KEYS[1], 'n', 1)
if served > tonumber(ARGV[1]) then return false end
return reply
"""
"""Count one replay of the entry and return its reply, unless it has none left."""


class RedisResponseCache:
    """A `ResponseCache` in Redis; a Redis that does not answer is a miss."""

    def __init__(self, link: RedisLink, *, ttl_s: float = DEFAULT_TTL_S, replays: int = 1) -> None:
        """Entries live `ttl_s` seconds and are replayed at most `replays` times each."""
        self._link = link
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._replays = replays
        self._client: redis.asyncio.Redis | None = None
        self._breaker = Breaker()

    def _redis(self) -> redis.asyncio.Redis:
        # Made on first use, inside the event loop that will use it.
        if self._client is None:
            self._client = self._link.async_client("cache")
        return self._client

    async def take(self, key: str) -> Completion | None:
        """The reply under `key` while it lives and has replays left; None on any failure."""
        if self._breaker.open:
            return None
        try:
            found = await self._redis().eval(_TAKE, 1, self._link.key("reply", key), self._replays)
        except REDIS_ERRORS:
            self._breaker.failed()
            return None
        self._breaker.succeeded()
        return decode_completion(found) if isinstance(found, bytes | str) else None

    async def keep(self, key: str, completion: Completion) -> None:
        """Store the reply with its replays unused; nothing happens when Redis is away."""
        if self._breaker.open:
            return
        name = self._link.key("reply", key)
        try:
            async with self._redis().pipeline(transaction=True) as pipe:
                pipe.delete(name)
                pipe.hset(name, mapping={"c": encode_completion(completion), "n": 0})
                pipe.pexpire(name, self._ttl_ms)
                await pipe.execute()
        except REDIS_ERRORS:
            self._breaker.failed()
            return
        self._breaker.succeeded()

    async def close(self) -> None:
        """Release the connections."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
