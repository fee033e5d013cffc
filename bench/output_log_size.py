"""How big a session log grows when one command prints a lot: events and SQLite bytes.

    python bench/output_log_size.py --megabytes 20

A scripted model runs one `bash` call that prints `--megabytes` MB in 80-character lines, each
written and flushed on its own (as a chatty build does), then says done. The session is logged
to a fresh SQLite file; the script prints how many `tool_output_chunk` events it holds, all
events, the database's size and the run's wall time. To compare with another version of Kestrel,
run this file with that version's `src` first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, call, say
from kestrel.protocol.events import Limits
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.sqlite import SQLiteStore
from kestrel.tools.registry import ToolRegistry, default_tools


def printer(root: Path, megabytes: float) -> str:
    """A command printing about `megabytes` MB, one flushed 80-character line at a time."""
    lines = int(megabytes * 1_000_000 / 80)
    script = root / "print_lines.py"
    script.write_text(f"import sys\nfor i in range({lines}):\n    print('%079d' % i)\n")
    return f"{sys.executable} -u {script.name}"


async def run_once(base: Path, megabytes: float) -> tuple[int, int, int, float]:
    """Run the session in `base`; return chunk events, all events, database bytes, seconds."""
    root = base / "work"
    root.mkdir()
    db = base / "events.db"
    store = SQLiteStore(db)
    session_id = start_session(
        store,
        task="print a lot",
        cwd=root,
        model="scripted",
        permission_mode="bypass",
        limits=Limits(),
        version="bench",
    )
    turns = [call("bash", command=printer(root, megabytes), timeout=600), say("done")]
    loop = AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer_for(ScriptedProvider(turns), RetryPolicy(max_attempts=1)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=base / "artifacts"
        ),
        approver=DenyingApprover(),
        config=LoopConfig(system_prompt="bench"),
    )
    started = time.perf_counter()
    await loop.run()
    seconds = time.perf_counter() - started
    records = list(store.read(session_id))
    chunks = sum(1 for r in records if r.event.type == "tool_output_chunk")
    store.close()
    size = sum(p.stat().st_size for p in base.glob("events.db*"))
    return chunks, len(records), size, seconds


def main() -> None:
    """Parse the options, run once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        chunks, events, size, seconds = asyncio.run(run_once(Path(tmp), args.megabytes))
    print(f"output: {args.megabytes:g} MB")
    print(f"tool_output_chunk events: {chunks:,}")
    print(f"all events: {events:,}")
    print(f"database: {size / 1_000_000:.1f} MB")
    print(f"wall time: {seconds:.1f} s")


if __name__ == "__main__":
    main()
