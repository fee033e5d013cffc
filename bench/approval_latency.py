"""How long a permission answer given from another process takes to reach the running session.

A headless session (`kestrel -p --wait-for-approvals`, scripted model, sandbox as configured)
asks before each of `--calls` commands; this process answers each question by writing
`approval_decided` to the store as `kestrel approve` does, and measures, from the log's own
timestamps: question logged -> seen here (what a client of the log waits), and answer written ->
`permission_decided` in the session (what the session waits). Prints median, p95 and max.

    python bench/approval_latency.py [--calls 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kestrel.app_store import STORE_FILE_NAME
from kestrel.protocol.events import ApprovalDecided, ApprovalRequested, PermissionDecided
from kestrel.store.sqlite import SQLiteStore


def _script(calls: int) -> list[dict[str, object]]:
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {i} > f{i}.txt"}}]}
        for i in range(calls)
    ]
    return [*turns, {"text": "done"}]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"{name:<34} median {statistics.median(ms):6.1f} ms  p95 {_quantile(ms, 0.95):6.1f} ms"
        f"  max {max(ms):6.1f} ms  (n={len(ms)})"
    )


def main() -> None:
    """Run one session, answer every question, print the latencies."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kestrel-approval-bench-"))
    try:
        project = folder / "project"
        project.mkdir()
        script = folder / "script.json"
        script.write_text(json.dumps(_script(args.calls)))
        home = folder / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        env.update(HOME=str(home), KESTREL_DATA_DIR=str(folder / "data"))
        argv = [sys.executable, "-m", "kestrel", "-p", "make files", "--model"]
        argv += [f"scripted:{script}", "--wait-for-approvals", "--output-format", "json"]
        proc = subprocess.Popen(
            argv,
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        seen, reached = _answer_all(folder / "data" / STORE_FILE_NAME, proc, args.calls)
        proc.communicate(timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(_line("question logged -> seen by a client", seen))
    print(_line("answer written -> session acts on it", reached))


def _answer_all(
    db: Path, proc: subprocess.Popen[str], calls: int
) -> tuple[list[float], list[float]]:
    while not db.exists():
        time.sleep(0.01)
    store = SQLiteStore(db)
    seen: list[float] = []
    answered: dict[str, float] = {}
    reached: list[float] = []
    after = 0
    try:
        while len(reached) < calls and proc.poll() is None:
            sessions = store.sessions()
            if not sessions:
                time.sleep(0.005)
                continue
            sid = sessions[0].session_id
            for record in store.read(sid, after):
                after = record.seq
                event = record.event
                if isinstance(event, ApprovalRequested):
                    seen.append(time.time() - record.at)
                    answer = ApprovalDecided(call_id=event.call_id, allow=True, by="bench")
                    answered[event.call_id] = store.append(sid, answer).at
                elif isinstance(event, PermissionDecided) and event.call_id in answered:
                    reached.append(record.at - answered[event.call_id])
            time.sleep(0.005)
    finally:
        store.close()
    return seen, reached


if __name__ == "__main__":
    main()
