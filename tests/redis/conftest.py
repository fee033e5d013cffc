"""Redis's tests run against the Redis server on loopback (`KESTREL_TEST_REDIS`, by default
redis://127.0.0.1:6379/0), each under a key prefix of its own that is deleted afterwards; they
are skipped when no server answers. Outages are made by cutting the test's own connections or a
relay in front of the server, never by stopping the server, which other work may be using."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for kit in (ROOT / "tests" / "store", ROOT / "tests" / "agent", ROOT / "tests" / "server"):
    if str(kit) not in sys.path:
        sys.path.append(str(kit))

pytest.importorskip("redis")

from redis_kit import REDIS_URL, admin  # noqa: E402
from tcp_proxy import Relay  # noqa: E402

from kestrel.redis_link import REDIS_ERRORS, RedisLink  # noqa: E402


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix for this test alone; its keys are deleted afterwards."""
    client = admin()
    try:
        client.ping()
    except REDIS_ERRORS as exc:
        pytest.skip(f"no Redis server to test against: {exc}")
    made = f"ktest-{secrets.token_hex(5)}:"
    yield made
    for key in client.scan_iter(match=made + "*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture
def link(prefix: str) -> RedisLink:
    """The test server, under the test's own prefix."""
    return RedisLink(REDIS_URL, prefix)


@pytest.fixture
def relay() -> Iterator[Relay]:
    """A relay to the test server that the test can cut."""
    from urllib.parse import urlparse

    parts = urlparse(REDIS_URL)
    made = Relay(parts.hostname or "127.0.0.1", parts.port or 6379)
    made.up()
    yield made
    made.down()


@pytest.fixture
def relayed_link(prefix: str, relay: Relay) -> RedisLink:
    """The test server through `relay`, under the test's own prefix."""
    return RedisLink(f"redis://127.0.0.1:{relay.port}/0", prefix)
