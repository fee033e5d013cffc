"""Checkpoint timings on a synthetic 5,000-file repository.

Builds a tree of mostly 1-20 KB text files in nested directories (plus a `.gitignore`d build
folder and a user `.git`) in a temporary directory, then times the shadow repository's first
snapshot, incremental snapshots after changing 1 and 50 files, a snapshot with nothing changed,
`list()` and `restore()`. Prints p50 and p95 for each.

    python bench/workspace.py [--files 5000] [--runs 20] [--first-runs 3]

Goal (issue: workspace): an incremental checkpoint under 200 ms.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kestrel.workspace import CheckpointStore

WORDS = ("def", "class", "return", "import", "value", "result", "items", "config", "parse", "path")


def text_of(rng: random.Random, size: int) -> bytes:
    """Source-like text of about `size` bytes."""
    lines: list[str] = []
    total = 0
    while total < size:
        line = "    " * rng.randint(0, 3) + " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def build_tree(root: Path, files: int, rng: random.Random) -> list[Path]:
    """Write `files` files in nested directories, an ignored build folder and a user repository."""
    paths: list[Path] = []
    for number in range(files):
        depth = rng.randint(1, 4)
        folder = root.joinpath(*(f"pkg{rng.randint(0, 9)}" for _ in range(depth)))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"module_{number}.py"
        # Mostly 1-20 KB text; one in fifty is a larger (~200 KB) generated file.
        size = rng.randint(200_000, 220_000) if number % 50 == 0 else rng.randint(1_000, 20_000)
        path.write_bytes(text_of(rng, size))
        paths.append(path)
    (root / ".gitignore").write_text("build/\n*.pyc\n")
    (root / "build").mkdir()
    for number in range(200):
        (root / "build" / f"out{number}.o").write_bytes(rng.randbytes(4096))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return paths


def percentiles(samples: list[float]) -> str:
    """'p50 X ms, p95 Y ms' for samples in seconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms"


def timed(action: Callable[[], object]) -> float:
    """Seconds that one call of `action` took."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def touch(rng: random.Random, paths: list[Path], count: int) -> None:
    """Rewrite `count` random files with new content."""
    for path in rng.sample(paths, count):
        path.write_bytes(text_of(rng, rng.randint(1_000, 20_000)))


def main() -> None:
    """Build the tree and print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--first-runs", type=int, default=3)
    options = parser.parse_args()
    rng = random.Random(7)
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    print(
        f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{git.stdout.strip()}, {options.files} files"
    )
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "repo"
        paths = build_tree(root, options.files, rng)
        megabytes = sum(p.stat().st_size for p in paths) / 1e6
        print(f"tree: {megabytes:.0f} MB in {len(paths)} files")
        first: list[float] = []
        for run in range(options.first_runs):
            store = CheckpointStore(root, Path(temp) / f"shadow-first-{run}")
            first.append(timed(lambda s=store: s.snapshot("first")))
        store = CheckpointStore(root, Path(temp) / "shadow")
        store.snapshot("baseline")
        results: dict[str, list[float]] = {"1 file": [], "50 files": [], "no change": []}
        for _ in range(options.runs):
            touch(rng, paths, 1)
            results["1 file"].append(timed(lambda: store.snapshot("one")))
            touch(rng, paths, 50)
            results["50 files"].append(timed(lambda: store.snapshot("fifty")))
            results["no change"].append(timed(lambda: store.snapshot("none")))
        checkpoints = store.list()
        listing = [timed(store.list) for _ in range(options.runs)]
        restore: list[float] = []
        for _ in range(options.runs):
            target = rng.choice(checkpoints[-20:])
            restore.append(timed(lambda t=target.id: store.restore(t)))
        print(f"first snapshot        {percentiles(first)}   ({options.first_runs} runs)")
        for name, samples in results.items():
            print(f"incremental, {name:9} {percentiles(samples)}")
        print(f"list ({len(checkpoints):3} entries)    {percentiles(listing)}")
        print(f"restore (1-50 files)  {percentiles(restore)}")


if __name__ == "__main__":
    main()
