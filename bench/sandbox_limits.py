"""How late a timed-out sandboxed command is reported, and what CPU a quota leaves a hog.

    python bench/sandbox_limits.py [--runs N]

Runs each attack with a 1 s deadline N times (default 5) in `BwrapExecutor` and prints how long
after the deadline the result came back; then two busy processes for 2 s under CPU quotas of
0.2 and 0.5 CPU and without one, and the CPUs they got on average (their rusage over wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.limits import Limits

ATTACKS = {
    "busy loop": "while :; do :; done",
    "SIGTERM trapped": "trap '' TERM; while :; do :; done",
    "double-forked daemon": "( (sleep 1000 &) & ); sleep 1000",
    "output flood (yes)": "yes",
}
HOG = """
import os, resource, time
start = time.monotonic()
for _ in range(2):
    if os.fork() == 0:
        while time.monotonic() - start < 2.0:
            pass
        os._exit(0)
for _ in range(2):
    os.wait()
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(round((used.ru_utime + used.ru_stime) / (time.monotonic() - start), 3))
"""


async def lateness(ws: Path, command: str) -> float:
    """Seconds from the deadline to the result."""
    started = time.monotonic()
    result = await BwrapExecutor(ws).run(command, cwd=ws, timeout_s=1.0)
    assert result.timed_out
    return time.monotonic() - started - 1.0


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        print(f"{'attack (deadline 1 s)':<24} {'median late ms':>15} {'max late ms':>12}")
        for name, command in ATTACKS.items():
            late = [await lateness(ws, command) for _ in range(runs)]
            print(f"{name:<24} {statistics.median(late) * 1000:>15.0f} {max(late) * 1000:>12.0f}")
        (ws / "hog.py").write_text(HOG)
        python = os.path.realpath(sys.executable)
        print(f"\n{'quota (cpus)':<24} {'CPUs used by two hogs':>22}")
        for cpus in (0.2, 0.5, None):
            sandbox = BwrapExecutor(ws, config=SandboxConfig(limits=Limits(cpus=cpus)))
            result = await sandbox.run(f"{python} hog.py", cwd=ws, timeout_s=30)
            print(f"{cpus or 'none':<24} {result.output.strip():>22}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
