"""A big index scores a long query within a postings budget; popular names stay out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from context_kit import committed_repo
from test_lexical import DOCS, brute_bm25, build, scored

import kestrel.context.lexical as lexical
from kestrel.context import ranking
from kestrel.context.engine import ContextEngine
from kestrel.context.segments import best_slots


def test_under_the_budget_every_term_is_scored() -> None:
    index, vocab = build(DOCS)
    query = {"parse": 1.0, "cache": 2.0, "template": 1.0, "load": 1.0}
    got = scored(index, vocab, query)
    for key, want in brute_bm25(DOCS, query).items():
        assert got[key] == pytest.approx(want)


def test_over_the_budget_the_commonest_terms_count_only_where_the_rarer_ones_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, vocab = build(DOCS)
    # `misc` is in 1 document, `cache`, `parse` and `template` in 2 each: a budget of 3
    # postings scores `misc` and the first of the others by term id (`parse`) in full; `cache`
    # and `template` are added to the documents those reached (a, c, e) and to no other.
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 3)
    query = {"misc": 1.0, "parse": 1.0, "cache": 1.0, "template": 1.0}
    got = scored(index, vocab, query)
    full = brute_bm25(DOCS, query)
    for key in ("a.py", "c.py", "e.py"):
        assert got[key] == pytest.approx(full[key])
    assert full["b.py"] > 0 and full["d.py"] > 0
    assert got["b.py"] == 0 and got["d.py"] == 0


def test_only_the_best_slots_get_the_terms_beyond_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, vocab = build(DOCS)
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 3)
    monkeypatch.setattr(lexical, "RESCORED", 1)
    query = {"misc": 1.0, "parse": 1.0, "cache": 1.0, "template": 1.0}
    got = scored(index, vocab, query)
    partial = brute_bm25(DOCS, {"misc": 1.0, "parse": 1.0})
    full = brute_bm25(DOCS, query)
    best = max(("a.py", "c.py", "e.py"), key=lambda key: partial[key])
    for key in ("a.py", "c.py", "e.py"):
        assert got[key] == pytest.approx(full[key] if key == best else partial[key])


def test_terms_beyond_the_budget_reach_the_best_slots_of_every_segment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, vocab = build(DOCS)
    index.put("f.py", *vocab.vector({"parse": 2, "cache": 3}))
    index.put("c.py", *vocab.vector({"parse": 1, "template": 1, "cache": 5}))
    # Now `parse` and `cache` are in 3 documents each: `misc` and `template` are scored in
    # full (b, e in the first segment, c in the one added since) and the others added there.
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 4)
    query = {"misc": 1.0, "parse": 1.0, "cache": 1.0, "template": 1.0}
    got = scored(index, vocab, query)
    docs = {**DOCS, "f.py": {"parse": 2, "cache": 3}}
    full = brute_bm25(docs, query)
    for key in ("b.py", "c.py", "e.py"):
        assert got[key] == pytest.approx(full[key])
    assert full["c.py"] > full["b.py"]
    assert got["a.py"] == got["d.py"] == got["f.py"] == 0


def test_a_term_over_the_budget_alone_is_still_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    index, vocab = build(DOCS)
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 1)
    got = scored(index, vocab, {"cache": 1.0})
    assert got["c.py"] > got["d.py"] > 0


def test_names_defined_too_often_leave_the_identifier_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"pkg/m{n}.py": "def run_job():\n    return 1\n" for n in range(3)}
    files["pkg/solo.py"] = "def settle_account():\n    return 2\n"
    repo = committed_repo(tmp_path / "repo", files)
    engine = ContextEngine.open(repo, tmp_path / "cache")
    engine.refresh()
    try:
        assert engine.definition_count("run_job") == 3
        named = ranking._named(engine)
        assert len(named("run_job")) == 3
        monkeypatch.setattr(ranking, "MAX_NAME_DEFINITIONS", 2)
        assert named("run_job") == []
        assert [path for path, _ in named("settle_account")] == ["pkg/solo.py"]
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("size", "reached", "n"),
    [
        (10, 4, 5),
        (90_000, 60_000, 7),  # a small index: every reached slot is ordered
        (300_000, 120_000, 3000),  # a sample sets the bar
        (500_000, 900, 100),  # too few reached for the sample to set one
        (400_000, 5, 0),
    ],
)
def test_best_slots_are_exactly_the_n_highest_positive_scores(
    size: int, reached: int, n: int
) -> None:
    rng = np.random.default_rng(size)
    scores = np.zeros(size)
    hit = rng.choice(size, reached, replace=False)
    scores[hit] = rng.exponential(1.0, reached).round(3)  # rounded: ties at the bar too
    got = best_slots(scores, n)
    want = np.sort(scores[scores > 0])[::-1][:n]
    assert len(got) == min(n, reached)
    assert np.array_equal(np.sort(scores[got])[::-1], want)
    assert np.all(scores[got] > 0)
