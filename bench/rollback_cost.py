"""What the atomic-step guarantee costs on a bigger workspace: the checkpoint taken before each
call that may change files (it usually finds nothing changed), and the rollback a resume does
for a command a crash cut short (keep the files, restore the rollback point, read the head).

    python bench/rollback_cost.py --files 10000 --rounds 5

The workspace is generated in a temporary folder: `--files` Python files of 20 lines in folders
of 100. Prints the seconds of each step; the first checkpoint is shown for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from kestrel.app import GitCheckpointer
from kestrel.workspace import CheckpointStore


def make_workspace(root: Path, files: int) -> None:
    """`files` small Python files, 100 to a folder."""
    for number in range(files):
        folder = root / f"d{number // 100}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{number % 100}.py").write_text(f"x = {number}\n" * 20)


async def measure(root: Path, rounds: int) -> None:
    """Time the first checkpoint, then `rounds` unchanged checkpoints and rollbacks."""
    checkpointer = GitCheckpointer(CheckpointStore(root, root.parent / "shadow", session="s"))
    began = time.perf_counter()
    first = await checkpointer.snapshot("first")
    assert first is not None
    print(f"first checkpoint: {time.perf_counter() - began:.2f} s")
    unchanged, rollbacks = [], []
    for _ in range(rounds):
        began = time.perf_counter()
        assert await checkpointer.snapshot("before a call") is None
        unchanged.append(time.perf_counter() - began)
        (root / "d1" / "f1.py").write_text("half of a command\n")  # what a killed command left
        (root / "new.txt").write_text("new\n")
        began = time.perf_counter()
        await checkpointer.snapshot("before the rollback")
        await checkpointer.restore(first.checkpoint_id)
        await checkpointer.head_id()
        rollbacks.append(time.perf_counter() - began)
    for name, times in (("checkpoint, nothing changed", unchanged), ("rollback", rollbacks)):
        print(f"{name}: median {statistics.median(times):.2f} s, max {max(times):.2f} s")


def main() -> None:
    """Generate the workspace and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kestrel-rollback-") as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        make_workspace(root, opts.files)
        asyncio.run(measure(root, opts.rounds))


if __name__ == "__main__":
    main()
