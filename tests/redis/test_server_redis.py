"""`kestrel serve` with Redis: two servers share one tenant's request count, and a hosted
session's events, its process's and the server's own, are published for every server's live
streams."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import redis
from redis_kit import REDIS_URL
from server_kit import Server, wait_for

from kestrel.redis_link import RedisLink
from kestrel.store.redis_publish import stream_key

TIGHT = """
[tight]
tier = 0
max_concurrent_sessions = 1
max_queued_sessions = 0
max_wall_s = 600
requests_per_minute = 4
"""


def with_redis(server: Server, link: RedisLink) -> Server:
    server.env.update(KESTREL_REDIS_URL=REDIS_URL, KESTREL_REDIS_PREFIX=link.prefix)
    return server


def test_two_servers_share_a_tenant_request_count(tmp_path: Path, link: RedisLink) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = with_redis(Server(tmp_path / "a", plans=TIGHT), link)
    second = with_redis(Server(tmp_path / "b", plans=TIGHT), link)
    second.data = first.data  # one deployment: the same accounts behind both
    first.start()
    second.start()
    try:
        token = first.token("acme", plan="tight")
        one, other = first.client(token), second.client(token)
        answers = [c.get("/sessions").status_code for c in (one, one, other, other)]
        assert answers == [200, 200, 200, 200]
        refused = other.get("/sessions")
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "limit"
        assert 1 <= int(refused.headers["Retry-After"]) <= 15
        assert one.get("/sessions").status_code == 429
    finally:
        first.stop()
        second.stop()


def test_a_hosted_session_publishes_its_events_to_redis(tmp_path: Path, link: RedisLink) -> None:
    server = with_redis(Server(tmp_path), link)
    server.start()
    try:
        client = server.client(server.token("acme"))
        # A reply that takes a while, so the stream is read while the session runs.
        script = server.script([{"text": "Nothing to do.", "delay_s": 0.5}], "quiet.json")
        body = {"task": "look", "source": {"path": str(server.repo())}, "model": script}
        created = client.post("/sessions", json=body)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        streamed = LiveTypes(client, sid)
        wait_for(client, sid, lambda v: v["finished"] == "done")
        events = client.get(f"/sessions/{sid}/events").json()
        streamed.join(timeout=30)
        assert streamed.types == [e["event"]["type"] for e in events]
        (completed,) = [e["event"] for e in events if e["event"]["type"] == "model_completed"]
        assert completed["cached"] is False and completed["saved_usage"] is None
        published = redis.Redis.from_url(REDIS_URL).xrange(stream_key(link, sid))
        published_seqs = [json.loads(fields[b"r"])["seq"] for _, fields in published]
        # Everything: what the session's own process logged, and what the server logged
        # itself (the start and the task), in order and once each.
        assert published_seqs == [e["seq"] for e in events]
    finally:
        server.stop()


class LiveTypes(threading.Thread):
    """Reads the session's live SSE stream until its `session_finished`, from the start."""

    def __init__(self, client: httpx.Client, sid: str) -> None:
        super().__init__(daemon=True)
        self.client, self.sid, self.types = client, sid, list[str]()
        self.start()

    def run(self) -> None:
        with self.client.stream("GET", f"/sessions/{self.sid}/events/stream") as answer:
            for line in answer.iter_lines():
                if line.startswith("data: ") and '"seq"' in line:
                    kind = json.loads(line[6:])["event"]["type"]
                    self.types.append(kind)
                    if kind == "session_finished":
                        return
