"""Redis in cluster mode: how long a logged event takes to reach server-side followers in other
processes, and what the response cache saves a resumed session.

Fan-out: this process is a session's process, appending `--events` events 10 ms apart to a
SQLite log; `--followers` processes each follow the session as a server does and report when
each event arrived, measured from the event's timestamp (taken as it is appended; all
processes read the same clock). Two runs: through Redis streams (the writer publishes, the
followers' fan-out reads the streams and never polls the log) and, for comparison, the
embedded path without Redis (one poll of the log every 50 ms).

Cache: a scripted session of `--turns` model calls (each reading another file, the
conversation growing by one exchange a turn) runs once against the model, priced as
claude-sonnet-4-5; a second process then runs the same session from its start, as a
worker that took it over after a crash would, with the same Redis response cache. Prints each
run's model calls, tokens and dollars, and the time a cached call took.

    python bench/redis_fanout.py [--events 300] [--followers 2] [--turns 20]
        [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from kestrel.protocol.events import SessionStarted, ToolFinished
from kestrel.redis_link import RedisLink
from kestrel.store.redis_publish import Publisher, PublishingStore
from kestrel.store.sqlite import SQLiteStore

SESSION = "bench-session"
MODEL = "claude-sonnet-4-5"
"""Priced as Anthropic lists it; the calls are scripted, so no model is reached."""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def follow(url: str, prefix: str, db: str, count: int) -> None:
    """A follower process: prints `ready`, then one line of latencies (ms) when done."""
    from kestrel.service.events import Fanout
    from kestrel.service.events_redis import RedisCarrier

    store = SQLiteStore(Path(db))
    carrier = RedisCarrier(RedisLink(url, prefix)) if url else None
    fanout = Fanout(store, poll_s=0.05 if carrier is None else 3600.0, carrier=carrier)
    fanout.carried_poll_s = 3600.0  # only Redis wakes the Redis run's followers
    fanout.start()
    late: list[float] = []
    async for record in fanout.follow(SESSION, 0):
        if record.seq == 1:
            print("ready", flush=True)
            continue
        late.append((time.time() - record.at) * 1000)
        if len(late) == count:
            break
    print(json.dumps(late), flush=True)
    await fanout.stop()
    store.close()


def fan_out_run(url: str, prefix: str, events: int, followers: int) -> list[float]:
    """Append `events` events while `followers` processes follow; every arrival's latency."""
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "log.db")
        inner = SQLiteStore(Path(db))
        store = PublishingStore(inner, Publisher(RedisLink(url, prefix))) if url else inner
        store.append(SESSION, SessionStarted(session_id=SESSION, task="t", cwd="/", model="m"))
        argv = [sys.executable, __file__, "--follow", url, prefix, db, str(events)]
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(followers)
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for n in range(events):
            store.append(SESSION, ToolFinished(call_id=f"c{n}", name="bash", content="x" * 400))
            time.sleep(0.01)
        late = [v for proc in procs for v in json.loads(proc.communicate(timeout=120)[0])]
        store.close()
        return late


def fan_out(url: str, prefix: str, events: int, followers: int) -> None:
    print(f"fan-out: {events} events 10 ms apart, {followers} follower processes")
    for name, via in (("redis streams", url), ("log poll, 50 ms (no Redis)", "")):
        late = fan_out_run(via, prefix, events, followers)
        print(
            f"  {name:28s} p50 {percentile(late, 0.5):6.2f} ms   p99 "
            f"{percentile(late, 0.99):6.2f} ms   max {max(late):6.2f} ms   (n={len(late)})"
        )


def script(turns: int) -> list[object]:
    from kestrel.models.pricing import price
    from kestrel.models.scripted import ScriptedTurn
    from kestrel.protocol.messages import Usage

    made: list[object] = []
    for n in range(turns):
        counts = Usage(model=MODEL, input_tokens=8000 + 1500 * n, output_tokens=250)
        cost, _ = price(counts, MODEL)
        spent = {"input_tokens": counts.input_tokens, "output_tokens": 250, "cost_usd": cost}
        call = (("read_file", json.dumps({"path": f"f{n}.py"})),)
        last = n == turns - 1
        made.append(
            ScriptedTurn(text="done" if last else "", tool_calls=() if last else call, usage=spent)
        )
    return made


async def session_run(root: Path, link: RedisLink, turns: list[object]) -> tuple[list, float]:
    """The session from its start in a fresh log; its model_completed events and wall time."""
    from kestrel.agent.loop import AgentLoop, LoopConfig
    from kestrel.agent.ports import DenyingApprover, ToolEnvironment
    from kestrel.agent.session import start_session
    from kestrel.app import streamer_for
    from kestrel.models.response_cache import CachingStreamer
    from kestrel.models.response_cache_redis import RedisResponseCache
    from kestrel.models.scripted import ScriptedProvider
    from kestrel.policy.gate import PermissionGate
    from kestrel.protocol.events import Limits, ModelCompleted
    from kestrel.sandbox.local import LocalExecutor
    from kestrel.store.memory import MemoryStore
    from kestrel.tools.registry import ToolRegistry, default_tools

    store = MemoryStore()
    start_session(
        store,
        task="t",
        cwd=root,
        model=MODEL,
        permission_mode="bypass",
        limits=Limits(),
        version="bench",
        session_id=SESSION,
    )
    cache = RedisResponseCache(link)
    inner = streamer_for(ScriptedProvider(turns))  # type: ignore[arg-type]
    loop = AgentLoop(
        store=store,
        session_id=SESSION,
        streamer=CachingStreamer(inner, cache, SESSION, lambda role: (MODEL,)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(root=root, executor=LocalExecutor(), artifacts_dir=root / ".a"),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="bench"),
        gate=PermissionGate(),
    )
    started = time.perf_counter()
    finished = await loop.run()
    elapsed = time.perf_counter() - started
    await cache.close()
    assert finished.reason == "done", finished
    calls = [r.event for r in store.read(SESSION) if isinstance(r.event, ModelCompleted)]
    return calls, elapsed


def cache_savings(url: str, prefix: str, turns: int) -> None:
    link = RedisLink(url, prefix)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for n in range(turns):
            (root / f"f{n}.py").write_text(f"print({n})\n" * 40)
        live, live_s = asyncio.run(session_run(root, link, script(turns)))
        again, again_s = asyncio.run(session_run(root, link, []))  # a model that cannot answer
    print(f"response cache: a {turns}-call session, then the same session resumed elsewhere")
    for name, calls, took in (("first run", live, live_s), ("resumed run", again, again_s)):
        cached = sum(c.cached for c in calls)
        tokens = sum(c.usage.total_input_tokens + c.usage.output_tokens for c in calls)
        cost = sum(c.usage.cost_usd for c in calls)
        print(
            f"  {name:12s} {len(calls)} calls, {cached} from cache, {tokens:,} tokens, "
            f"${cost:.4f}, {took * 1000 / len(calls):.1f} ms a turn"
        )
    saved = sum(c.saved_usage.cost_usd for c in again if c.saved_usage is not None)
    print(f"  saved by the cache: ${saved:.4f} ({MODEL} prices)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--follow":
        url, prefix, db, count = sys.argv[2:6]
        asyncio.run(follow(url, prefix, db, int(count)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--followers", type=int, default=2)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    prefix = f"kbench-{secrets.token_hex(4)}:"
    try:
        fan_out(args.redis, prefix, args.events, args.followers)
        cache_savings(args.redis, prefix, args.turns)
    finally:
        client = redis.Redis.from_url(args.redis)
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)


if __name__ == "__main__":
    main()
