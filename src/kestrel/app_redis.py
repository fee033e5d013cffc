"""The composition root's choices for Redis (`redis_url`): the response cache of a session's
model calls and the publishing of its events. Without `redis_url` both are left out and a
session runs exactly as on one machine. The `redis` package is imported only when used."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kestrel.models.response_cache import Streamer
    from kestrel.models.router import ModelRouter
    from kestrel.redis_link import RedisLink
    from kestrel.settings import Settings
    from kestrel.store.base import EventStore


def redis_link(settings: Settings) -> RedisLink | None:
    """Where the settings' Redis is, or None when there is none."""
    if settings.redis_url is None:
        return None
    from kestrel.redis_link import RedisLink

    return RedisLink(settings.redis_url, settings.redis_prefix)


def with_response_cache(
    streamer: Streamer, router: ModelRouter, session_id: str, settings: Settings
) -> Streamer:
    """`streamer`, answering identical requests of the session from the Redis response cache
    when the settings have one (`redis_url`, and `response_cache_ttl_s` above 0)."""
    link = redis_link(settings)
    if link is None or settings.response_cache_ttl_s <= 0:
        return streamer
    from kestrel.models.response_cache import CachingStreamer
    from kestrel.models.response_cache_redis import RedisResponseCache

    cache = RedisResponseCache(link, ttl_s=settings.response_cache_ttl_s)
    return CachingStreamer(streamer, cache, session_id, lambda role: router.for_role(role).names)


def publishing(store: EventStore, settings: Settings) -> EventStore:
    """`store`, publishing each appended record to Redis for live followers in other
    processes when the settings name a Redis."""
    link = redis_link(settings)
    if link is None:
        return store
    from kestrel.store.redis_publish import Publisher, PublishingStore

    return PublishingStore(store, Publisher(link))
