"""Per-command overhead of the sandbox: `true` through BwrapExecutor, LocalExecutor and bare exec.

Times each way of running `true` (after a few warm-up runs) and prints p50 and p95:

    python bench/sandbox_start.py [--runs 200]

Goals (issue: sandbox): BwrapExecutor p50 under 20 ms and p95 under 40 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.local import LocalExecutor

WARMUP = 5


async def timings(run: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    """Milliseconds per call of `run`, after a few untimed calls."""
    for _ in range(WARMUP):
        await run()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await run()
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(name: str, values: list[float]) -> str:
    """One row: p50 and p95 in milliseconds."""
    cuts = statistics.quantiles(values, n=100)
    return f"| {name} | {statistics.median(values):.1f} | {cuts[94]:.1f} |"


async def main(runs: int) -> None:
    """Print a Markdown table of the three ways of running `true`."""
    with tempfile.TemporaryDirectory(prefix="kestrel-bench-") as folder:
        ws = Path(folder)

        async def bare() -> object:
            return await asyncio.to_thread(subprocess.run, ["true"], check=True)

        local = LocalExecutor()
        sandboxes = {
            "BwrapExecutor (cgroups where writable)": BwrapExecutor(ws),
            "BwrapExecutor (rlimits only)": BwrapExecutor(
                ws, config=SandboxConfig(use_cgroups=False)
            ),
        }
        rows = [summary("subprocess.run(['true'])", await timings(bare, runs))]
        rows.append(
            summary(
                "LocalExecutor",
                await timings(lambda: local.run("true", cwd=ws, timeout_s=10), runs),
            )
        )
        for name, sandbox in sandboxes.items():
            check = await sandbox.run("true", cwd=ws, timeout_s=10)
            assert check.exit_code == 0, check.output
            rows.append(
                summary(
                    name, await timings(lambda s=sandbox: s.run("true", cwd=ws, timeout_s=10), runs)
                )
            )
    print(f"{platform.machine()}, Python {platform.python_version()}, {runs} runs each")
    print("| how `true` runs | p50 ms | p95 ms |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))
