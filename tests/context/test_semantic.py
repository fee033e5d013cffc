"""Exact vector search over chunk rows, kept current through puts and removals."""

from __future__ import annotations

import numpy as np
import pytest

from kestrel.context.semantic import VectorIndex, spread


def unit(rng: np.random.Generator, rows: int, dim: int = 8) -> np.ndarray:
    x = rng.standard_normal((rows, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)


def brute_force(
    files: dict[str, np.ndarray], query: np.ndarray, centre: np.ndarray | None
) -> dict[str, float]:
    """The best centred cosine of each file's rows, computed row by row."""
    assert centre is not None
    q = query - centre
    q /= np.linalg.norm(q)
    out = {}
    for key, rows in files.items():
        centred = rows.astype(np.float32) - centre
        out[key] = max(float(r @ q / np.linalg.norm(r)) for r in centred)
    return out


def test_search_matches_brute_force_through_puts_and_removals() -> None:
    rng = np.random.default_rng(0)
    files = {f"f{n}.py": unit(rng, int(rng.integers(1, 6))) for n in range(300)}
    index = VectorIndex()
    index.bulk_load(files.items())
    query = unit(rng, 1)[0].astype(np.float32)
    for step in range(60):
        key = f"f{int(rng.integers(0, 320))}.py"
        if step % 3 == 0:
            files.pop(key, None)
            index.remove(key)
        else:
            files[key] = unit(rng, int(rng.integers(1, 6)))
            index.put(key, files[key])
        if step % 7 == 0:
            hits = index.search(query, files=len(files) + 10, rows=5)
            expected = brute_force(files, query, index.centre)
            assert hits.files.keys() == expected.keys()
            for key_, score in hits.files.items():
                assert abs(score - expected[key_]) < 1e-5
    assert len(index) == len(files)


def test_many_changes_are_folded_into_one_matrix() -> None:
    rng = np.random.default_rng(2)
    files = {f"f{n}.py": unit(rng, 3) for n in range(100)}
    index = VectorIndex()
    index.bulk_load(files.items())
    query = unit(rng, 1)[0].astype(np.float32)
    index.search(query, files=1, rows=1)  # stacked once
    for n in range(50, 1500):  # far more rows than the delta may hold
        files[f"f{n}.py"] = unit(rng, 4)
        index.put(f"f{n}.py", files[f"f{n}.py"])
        if n % 500 == 0:
            hits = index.search(query, files=len(files), rows=1)
            assert hits.files == pytest.approx(brute_force(files, query, index.centre), abs=1e-5)
    hits = index.search(query, files=len(files), rows=1)
    assert hits.files == pytest.approx(brute_force(files, query, index.centre), abs=1e-5)


def test_best_rows_name_their_file_and_position() -> None:
    index = VectorIndex()
    a = np.array([[1, 0], [0, 1]], dtype=np.float16)
    b = np.array([[0.6, 0.8], [-1, 0], [0.8, 0.6]], dtype=np.float16)
    index.bulk_load([("a.py", a), ("b.py", b)])
    hits = index.search(np.array([1.0, 0.0], dtype=np.float32), files=1, rows=2)
    assert list(hits.files) == ["a.py"]
    assert [(k, i) for k, i, _ in hits.rows] == [("a.py", 0), ("b.py", 2)]


def test_a_removed_file_never_scores_and_a_replaced_one_scores_anew() -> None:
    index = VectorIndex()
    index.bulk_load(
        [("a.py", np.array([[1, 0]], np.float16)), ("b.py", np.array([[0, 1]], np.float16))]
    )
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert list(index.search(query, files=5, rows=5).files) == ["a.py", "b.py"]
    index.remove("a.py")
    assert "a.py" not in index.search(query, files=5, rows=5).files
    index.put("b.py", np.array([[1, 0]], np.float16))
    assert index.search(query, files=5, rows=5).files == {"b.py": pytest.approx(1.0)}
    index.put("c.py", np.zeros((0, 2), np.float16))  # nothing to search: ignored
    assert "c.py" not in index


def test_empty_index_finds_nothing() -> None:
    hits = VectorIndex().search(np.ones(4, np.float32), files=3, rows=3)
    assert hits.files == {} and hits.rows == []


def test_spread_maps_the_pool_onto_zero_to_one() -> None:
    assert spread({"a": 0.5, "b": 0.3, "c": 0.4}) == {"a": 1.0, "c": pytest.approx(0.5)}
    assert spread({"a": 0.5}) == {"a": 1.0}
    assert spread({"a": -0.2, "b": -0.1}) == {}
    assert spread({}) == {}
