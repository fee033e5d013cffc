"""What Redis's tests share: the test server's URL, a plain client, and a way to cut the
connections of Kestrel's own clients (never anyone else's)."""

from __future__ import annotations

import os

import redis

from kestrel.redis_link import RedisLink

REDIS_URL = os.environ.get("KESTREL_TEST_REDIS", "redis://127.0.0.1:6379/0")


def admin() -> redis.Redis:
    """A plain client of the test server."""
    return redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)


def kill_clients(link: RedisLink, role: str) -> int:
    """Close every connection of the clients of `role` under `link` (and no one else's), as a
    Redis restart would; how many there were."""
    client = admin()
    name = link.client_name(role)
    killed = 0
    for entry in client.client_list():
        if entry.get("name") == name:
            killed += int(client.client_kill_filter(_id=entry["id"]))
    client.close()
    return killed
