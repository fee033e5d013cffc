"""A session whose process died after the model answered is resumed elsewhere: the same
requests are answered from the Redis response cache, logged as cached and costing nothing, and
once the replays are used up the same requests go to the model again."""

from __future__ import annotations

import json
from pathlib import Path

from loop_kit import transcript

from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.models.response_cache import CachingStreamer
from kestrel.models.response_cache_redis import RedisResponseCache
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn
from kestrel.policy.gate import PermissionGate
from kestrel.protocol.events import Limits, ModelCompleted, Record
from kestrel.redis_link import RedisLink
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.memory import MemoryStore
from kestrel.tools.registry import ToolRegistry, default_tools

SESSION = "sess-cached-1"
SPENT = {"input_tokens": 1000, "output_tokens": 50, "cost_usd": 0.5}
SCRIPT = [
    ScriptedTurn(tool_calls=(("read_file", json.dumps({"path": "a.py"})),), usage=SPENT),
    ScriptedTurn(text="done: a.py says hello", usage=SPENT),
]


async def run_session(root: Path, link: RedisLink, turns: list[ScriptedTurn]) -> AgentLoop:
    """The session `SESSION` run from its start in a process of its own (a fresh log with the
    same first events), its model calls going through the Redis response cache."""
    store = MemoryStore()
    start_session(
        store,
        task="read a.py",
        cwd=root,
        model="scripted",
        permission_mode="bypass",
        limits=Limits(),
        version="test",
        session_id=SESSION,
    )
    cache = RedisResponseCache(link)
    inner = streamer_for(ScriptedProvider(turns), RetryPolicy(max_attempts=1))
    loop = AgentLoop(
        store=store,
        session_id=SESSION,
        streamer=CachingStreamer(inner, cache, SESSION, lambda role: ("scripted",)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="You are being tested."),
        gate=PermissionGate(),
    )
    try:
        finished = await loop.run()
    finally:
        await cache.close()
    assert finished.reason == "done"
    return loop


def completions(loop: AgentLoop) -> list[ModelCompleted]:
    records: list[Record] = list(loop.store.read(SESSION))
    return [r.event for r in records if isinstance(r.event, ModelCompleted)]


async def test_a_resumed_session_is_answered_from_the_cache_for_nothing(
    tmp_path: Path, link: RedisLink
) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.py").write_text("print('hello')\n")

    first = await run_session(root, link, SCRIPT)
    # The process that takes the session over has a model that must not be asked: an empty
    # script raises at the first request it gets.
    resumed = await run_session(root, link, [])

    assert transcript(resumed.store.read(SESSION)) == transcript(first.store.read(SESSION))
    live, cached = completions(first), completions(resumed)
    assert [c.cached for c in live] == [False, False]
    assert [c.cached for c in cached] == [True, True]
    assert [c.message for c in cached] == [c.message for c in live]
    for hit, original in zip(cached, live, strict=True):
        assert hit.usage.cost_usd == 0 and hit.usage.total_input_tokens == 0
        assert hit.saved_usage == original.usage
    assert first.state.totals.cost_usd == 1.0
    assert resumed.state.totals.cost_usd == 0
    assert resumed.state.totals.input_tokens == 0
    results = [r for r in resumed.store.read(SESSION) if r.event.type == "tool_finished"]
    assert len(results) == 1 and "hello" in str(results[0].event)


async def test_the_same_requests_again_reach_the_model_once_replays_are_used(
    tmp_path: Path, link: RedisLink
) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.py").write_text("print('hello')\n")
    await run_session(root, link, SCRIPT)
    await run_session(root, link, [])  # replays each entry once
    third = await run_session(root, link, SCRIPT)
    assert [c.cached for c in completions(third)] == [False, False]
    assert third.state.totals.cost_usd == 1.0
