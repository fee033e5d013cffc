"""What one sample of the workspace quota costs, by tree size, and how often it then samples.

    python bench/quota_scan.py [FILES ...]      # default: 1000 10000 50000

Builds a tree of small files in folders of 100 under a temporary directory, times `disk_usage`
on it (the median of five scans, warm cache), and prints the resulting sampling interval: the
quota rests 4x a scan's time after each one, and samples at most every 200 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from kestrel.sandbox.quota import BUSY_SHARE, disk_usage

CHECK_EVERY_S = 0.2


def build(root: Path, files: int) -> None:
    """`files` files of 100 bytes, in folders of 100."""
    for i in range(files):
        folder = root / f"d{i // 100}"
        if i % 100 == 0:
            folder.mkdir()
        (folder / f"f{i}.txt").write_bytes(b"x" * 100)


def main(sizes: list[int]) -> None:
    print(f"{'files':>8} {'scan ms':>9} {'sample every ms':>16} {'core share':>11}")
    for files in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            build(root, files)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                disk_usage(root)
                times.append(time.perf_counter() - start)
            scan = statistics.median(times)
            every = max(CHECK_EVERY_S, scan / BUSY_SHARE)
            print(f"{files:>8} {scan * 1000:>9.1f} {every * 1000:>16.0f} {scan / every:>11.2f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 10000, 50000])
