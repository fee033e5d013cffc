"""`kestrel serve` under load: many scripted sessions at once over loopback.

Starts a real `kestrel serve` (its own data folder, `--workers W`), makes a tenant on the team
plan, and starts `--sessions` sessions at once, each on its own small git repository, each with
a scripted model that reads a file, greps and answers (no approval needed). One Server-Sent
Events client per session follows its events from creation to `session_finished`.

Prints: action-to-client latency (an event appended to the log -> received by the SSE client,
from the record's own timestamp; same machine, same clock) p50 / p99 / max over every event
logged while the client was connected (what came before is history, sent at once);
sessions finished per minute; the server process's peak RSS (sampled every 50 ms; the sessions'
own processes are not counted).

    python bench/serve_load.py [--sessions 50] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

KESTREL = [sys.executable, "-m", "kestrel"]
TURNS = [
    {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
    {"tool_calls": [{"name": "grep", "arguments": {"pattern": "def "}}]},
    {"text": "There is one function, f, which returns 1."},
]


def _repo(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "a.py").write_text("def f():\n    return 1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@e", *args], cwd=root, check=True
        )


def new_token(env: dict[str, str], data: Path, tenant: str) -> str:
    """A team-plan tenant's API token, made with `kestrel serve tokens create`."""
    create = [*KESTREL, "serve", "tokens", "create", "--tenant", tenant, "--plan", "team"]
    made = subprocess.run(
        [*create, "--data-dir", str(data)], env=env, capture_output=True, text=True, check=True
    )
    return made.stdout.strip().splitlines()[-1]


def start_server(
    env: dict[str, str], data: Path, workers: int, root: Path, scripts: Path
) -> tuple[subprocess.Popen[str], str]:
    """A `kestrel serve` on a free loopback port, and its address once it listens."""
    argv = [*KESTREL, "serve", "--port", "0", "--data-dir", str(data), "--workers"]
    argv += [str(workers), "--allowed-root", str(root), "--allow-scripted-models", str(scripts)]
    server = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, server.stdout.readline().split("listening on ", 1)[1].strip()


def latency_line(what: str, latencies: list[float]) -> str:
    """p50, p99 and max of latencies given in seconds, in milliseconds."""
    ms = sorted(v * 1000 for v in latencies)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    return f"{what}: p50 {statistics.median(ms):.0f} ms, p99 {p99:.0f} ms, max {ms[-1]:.0f} ms"


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


FINISHED: dict[str, int] = {}
"""How many sessions finished for each reason: every one should be `done`."""


async def _follow(client: httpx.AsyncClient, sid: str, latencies: list[float]) -> None:
    async with client.stream("GET", f"/sessions/{sid}/events/stream") as answer:
        connected = time.time()
        async for line in answer.aiter_lines():
            if not line.startswith("data: "):
                continue
            record = json.loads(line[6:])
            if "at" not in record:  # A status event: not a record of the log.
                continue
            at = float(record["at"])
            if at >= connected:  # Logged before the stream began: history, not live.
                latencies.append(time.time() - at)
            if record["event"]["type"] == "session_finished":
                reason = str(record["event"]["reason"])
                FINISHED[reason] = FINISHED.get(reason, 0) + 1
                return


async def _load(url: str, token: str, repos: list[Path], model: str) -> tuple[list[float], float]:
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=len(repos) * 2 + 10)
    async with httpx.AsyncClient(
        base_url=url + "/v1", headers=headers, timeout=600, limits=limits
    ) as client:
        start = time.perf_counter()

        async def one(repo: Path) -> None:
            body = {"task": "what does a.py do?", "source": {"path": str(repo)}, "model": model}
            created = await client.post("/sessions", json=body)
            created.raise_for_status()
            await _follow(client, created.json()["id"], latencies)

        await asyncio.gather(*(one(repo) for repo in repos))
        return latencies, time.perf_counter() - start


def main() -> None:
    """Run the load and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kestrel-serve-load-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env["HOME"] = str(folder / "home")
    data, scripts, repos_dir = folder / "data", folder / "scripts", folder / "repos"
    scripts.mkdir()
    (scripts / "s.json").write_text(json.dumps(TURNS))
    repos = [repos_dir / f"r{i}" for i in range(args.sessions)]
    for repo in repos:
        _repo(repo)
    token = new_token(env, data, "load")
    server, url = start_server(env, data, args.workers, repos_dir, scripts)
    try:
        peak = [0]

        async def run() -> tuple[list[float], float]:
            async def sample() -> None:
                while True:
                    peak[0] = max(peak[0], _rss_kb(server.pid))
                    await asyncio.sleep(0.05)

            sampler = asyncio.create_task(sample())
            try:
                return await _load(url, token, repos, f"scripted:{scripts / 's.json'}")
            finally:
                sampler.cancel()

        latencies, wall = asyncio.run(run())
    finally:
        server.terminate()
        server.communicate(timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"sessions {args.sessions}, workers {args.workers}, events {len(latencies)}")
    print(latency_line("event appended -> SSE client", latencies))
    print(f"sessions per minute: {args.sessions / wall * 60:.1f} (all done in {wall:.1f} s)")
    print("finished: " + ", ".join(f"{n} {reason}" for reason, n in sorted(FINISHED.items())))
    print(f"server peak RSS: {peak[0] / 1024:.0f} MB (session processes not counted)")


if __name__ == "__main__":
    main()
