"""Kestrel's own cost per agent step, with the scripted model, and the event store's append latency.

Runs real sessions (SQLite event log on disk, real tools, real files) whose model is scripted, and
reports the wall time per step that is not spent inside tools: building the request, streaming
the reply into events, permission decisions, dispatch, and folding every event into the session
state. Then times raw appends to the event log.

    python bench/loop_overhead.py [--steps 200] [--appends 5000]

Goals (issue: core loop): under 5 ms per step excluding tool time; append p95 under 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
from pathlib import Path

from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn, call, say
from kestrel.protocol.events import (
    Limits,
    ModelTextDelta,
    SessionStarted,
    ToolFinished,
    ToolOutputChunk,
)
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.sqlite import SQLiteStore
from kestrel.tools.registry import ToolRegistry, default_tools


def script(steps: int) -> list[ScriptedTurn]:
    """A session of `steps` turns, each saying a sentence and reading a small file."""
    turns = [
        call("read_file", f"Step {i}: checking the module once more.", path=f"mod{i % 20}.py")
        for i in range(steps)
    ]
    return [*turns, say("Done.")]


async def one_session(root: Path, store: SQLiteStore, steps: int) -> tuple[float, float, int]:
    """Run a session; return (wall seconds, seconds inside tools, events written)."""
    session_id = start_session(
        store,
        task="benchmark",
        cwd=root,
        model="scripted",
        permission_mode="bypass",
        limits=Limits(max_turns=steps + 5),
        version="bench",
    )
    loop = AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer_for(ScriptedProvider(script(steps))),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="benchmark", stop_after=10_000, warn_after=10_000),
    )
    started = time.perf_counter()
    finished = await loop.run()
    wall = time.perf_counter() - started
    assert finished.reason == "done", finished
    records = store.read(session_id)
    tools = sum(r.event.duration_ms for r in records if isinstance(r.event, ToolFinished)) / 1000
    return wall, tools, len(records)


def bench_steps(workdir: Path, steps: int, repeats: int) -> None:
    root = workdir / "repo"
    root.mkdir()
    for i in range(20):
        (root / f"mod{i}.py").write_text(
            "".join(f"def f{j}():\n    return {j}\n" for j in range(40))
        )
    store = SQLiteStore(workdir / "sessions.db")
    per_step = []
    for _ in range(repeats):
        wall, tools, events = asyncio.run(one_session(root, store, steps))
        per_step.append((wall - tools) / (steps + 1) * 1000)
    store.close()
    print(
        f"loop overhead, {steps}-step sessions x{repeats}: "
        f"median {statistics.median(per_step):.2f} ms/step, "
        f"worst {max(per_step):.2f} ms/step ({events} events per session)"
    )


def bench_appends(workdir: Path, count: int, synchronous: str) -> None:
    store = SQLiteStore(workdir / f"append-{synchronous}.db", synchronous=synchronous)  # type: ignore[arg-type]
    store.append("s", SessionStarted(session_id="s", task="t", cwd="/", model="m"))
    events = [
        ModelTextDelta(request_id="r", text="a few words of streamed text "),
        ToolOutputChunk(call_id="c", text="collected 12 items\n" * 4),
        ToolFinished(call_id="c", name="read_file", content="     1\tline\n" * 200),
    ]
    latencies = []
    for i in range(count):
        t = time.perf_counter()
        store.append("s", events[i % len(events)])
        latencies.append((time.perf_counter() - t) * 1000)
    store.close()
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    print(
        f"event append ({synchronous}), {count} appends: p50 {q[49]:.3f} ms, "
        f"p95 {q[94]:.3f} ms, p99 {q[98]:.3f} ms, max {latencies[-1]:.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--appends", type=int, default=5000)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (20, args.steps):
            step_dir = Path(tmp) / f"steps{steps}"
            step_dir.mkdir()
            bench_steps(step_dir, steps, args.repeats)
        bench_appends(Path(tmp), args.appends, "NORMAL")
        bench_appends(Path(tmp), args.appends, "FULL")


if __name__ == "__main__":
    main()
