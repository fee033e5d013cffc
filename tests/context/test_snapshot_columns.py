"""The snapshot's columns are written part by part: the same bytes, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np

from kestrel.context.snapshot_write import Joined, write_columns


def written(column: Joined, path: Path) -> bytes:
    with path.open("wb") as out:
        column.write(out)
    return path.read_bytes()


def test_parts_are_written_as_their_concatenation(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 1000, size=int(n)) for n in rng.integers(0, 9, size=10_000)]
    column = Joined(parts, np.dtype(np.int32), (sum(len(p) for p in parts),))
    assert written(column, tmp_path / "a") == np.concatenate(parts).astype(np.int32).tobytes()
    assert column.nbytes == 4 * column.shape[0]
    rows = [rng.random((int(n), 3)).astype(np.float16) for n in (2, 0, 5)]
    vectors = Joined(rows, np.dtype(np.float16), (7, 3))
    assert written(vectors, tmp_path / "b") == np.concatenate(rows).tobytes()
    assert vectors.nbytes == 7 * 3 * 2
    assert written(Joined([], np.dtype(np.uint8), (0,)), tmp_path / "c") == b""


def test_writing_leaves_nothing_behind_per_part(tmp_path: Path) -> None:
    """numpy keeps a note of every buffer exported from an array for as long as it lives; the
    parts are the index's own arrays, millions of them, so none is exported."""
    parts = [np.arange(5, dtype=np.int32) for _ in range(50_000)]
    column = Joined(parts, np.dtype(np.int32), (250_000,))
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        written(column, tmp_path / "a")
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown < 200_000  # one note per part would be 3.6 MB


def test_a_dead_writers_temporary_files_go_at_once(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = int(gone.stdout)  # a process that has ended: its id is free (or another's, kept)
    live = os.getppid()  # alive: whoever started these tests
    names = {
        f".postings.snap.{dead}.tmp": False,
        f".postings.snap.part-{dead}-3.tmp": False,
        f".postings.snap.{live}.tmp": True,  # its writer may still be writing it
        ".postings.snap.unnamed.tmp": True,  # not named by this code: the age limit decides
    }
    for name in names:
        (tmp_path / name).write_bytes(b"partial")
    write_columns(tmp_path / "postings.snap", {"format": 0}, {"a": np.arange(3)})
    assert {name: (tmp_path / name).exists() for name in names} == names
    assert (tmp_path / "postings.snap").is_file()
