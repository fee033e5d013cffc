"""A snapshot merged from stored bodies is the one written from the decoded records."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import kestrel.context.stored_postings as stored_postings
from kestrel.context.lexical import Bm25Index
from kestrel.context.model import FileSymbols, Symbol
from kestrel.context.postings import Postings
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import Snapshot
from kestrel.context.snapshot_merge import write_merged
from kestrel.context.snapshot_runs import runs_of
from kestrel.context.snapshot_write import SnapshotInput, write_snapshot

NAMES = ["parse", "render", "walrus", "__init__", "handler", "census"]


def record(n: int, rng: random.Random, *, vectors: bool) -> FileRecord:
    def terms(count: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.array(sorted(rng.sample(range(300), count)), dtype=np.int32)
        return ids, np.array([rng.randint(1, 5) for _ in ids], dtype=np.float32)

    if n % 5 == 4:  # a text file: no symbols, no chunks
        return FileRecord(f"docs/n{n}.md", n, n, f"h{n}", "text", None, terms(3), ())
    defs = tuple(
        Symbol(
            name=(name := rng.choice(NAMES)),
            qualname=f"C{n}.{name}",
            kind="method",
            line=i * 3 + 1,
            end_line=i * 3 + 2,
            signature=f"def {name}(self, x{i})",
        )
        for i in range(rng.randint(0, 4))
    )
    symbols = FileSymbols(language="python", definitions=defs, references=("os",), imports=())
    chunks = tuple(terms(rng.randint(1, 6)) for _ in defs)
    rows = (len(chunks) + 1) if vectors and n % 3 else 0
    vecs = np.full((rows, 4), n, dtype=np.float16) if rows else None
    return FileRecord(f"src/m{n}.py", n, n, f"h{n}", "code", symbols, terms(8), chunks, vecs)


def data_of(ranked: list[FileRecord], others: list[FileRecord]) -> SnapshotInput:
    exports = Postings.built(ranked, lambda r: r.vectors is not None).exports()
    assert exports is not None
    return SnapshotInput(
        token="t",
        embedder=None,
        terms=[f"term{i}" for i in range(300)],
        ranked=ranked,
        others=others,
        files=exports[0],
        chunks=exports[1],
        generation="g",
        written=3,
        nonce="n",
    )


def parts(tmp_path: Path, records: list[FileRecord], size: int) -> dict[str, FileRecord]:
    """The records written to parts of `size` (in a shuffled order) and read back lazily."""
    empty = Bm25Index().export()
    out: dict[str, FileRecord] = {}
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)
    for n, at in enumerate(range(0, len(shuffled), size)):
        group = shuffled[at : at + size]
        path = tmp_path / f"part{n}.snap"
        ranked = [r for r in group if r.kind == "code"]
        others = [r for r in group if r.kind != "code"]
        write_snapshot(path, SnapshotInput("t", None, (), ranked, others, empty, empty))
        part = Snapshot(path)
        heads = part.heads()
        assert heads is not None
        out.update({h[0]: FileRecord.lazy(h, part, i) for i, h in enumerate(heads)})
    return out


@pytest.mark.parametrize(
    ("size", "vectors", "sorted_at_once"), [(1000, False, 1 << 22), (7, True, 5), (1, True, 40)]
)
def test_merged_from_parts_equals_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, vectors: bool, sorted_at_once: int
) -> None:
    monkeypatch.setattr(stored_postings, "RANGE_POSTINGS", sorted_at_once)
    monkeypatch.setattr(stored_postings, "BLOCK_DOCS", 3 if size < 1000 else 4096)
    rng = random.Random(size)
    records = [record(n, rng, vectors=vectors) for n in range(60)]
    ranked = [r for r in records if r.kind == "code"]
    others = [r for r in records if r.kind != "code"]
    write_snapshot(tmp_path / "whole.snap", data_of(ranked, others))
    lazy = parts(tmp_path, records, size)
    merged = data_of([lazy[r.path] for r in ranked], [lazy[r.path] for r in others])
    assert len(runs_of(merged.ranked)) > (1 if size < 1000 else 0)
    write_merged(tmp_path / "merged.snap", merged)
    want, got = Snapshot(tmp_path / "whole.snap"), Snapshot(tmp_path / "merged.snap")
    assert got._header == want._header
    for name, array in want._arrays.items():
        mine = got.array(name)
        assert mine.dtype == array.dtype and mine.shape == array.shape, name
        assert np.array_equal(mine, array), name
    assert repr(got.body(5)) == repr(want.body(5))


def test_a_record_kept_in_memory_cannot_be_merged(tmp_path: Path) -> None:
    records = [record(n, random.Random(1), vectors=False) for n in range(3)]
    with pytest.raises(ValueError, match="not stored"):
        runs_of(records)
