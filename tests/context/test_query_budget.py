"""A big index scores a long query within a postings budget; popular names stay out."""

from __future__ import annotations

from pathlib import Path

import pytest
from context_kit import committed_repo
from test_lexical import DOCS, brute_bm25, build, scored

import kestrel.context.lexical as lexical
from kestrel.context import ranking
from kestrel.context.engine import ContextEngine


def test_under_the_budget_every_term_is_scored() -> None:
    index, vocab = build(DOCS)
    query = {"parse": 1.0, "cache": 2.0, "template": 1.0, "load": 1.0}
    got = scored(index, vocab, query)
    for key, want in brute_bm25(DOCS, query).items():
        assert got[key] == pytest.approx(want)


def test_over_the_budget_the_commonest_terms_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, vocab = build(DOCS)
    # `misc` is in 1 document, `cache`, `parse` and `template` in 2 each: a budget of 3
    # postings keeps `misc` and the first of the others by term id (`parse`).
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 3)
    query = {"misc": 1.0, "parse": 1.0, "cache": 1.0, "template": 1.0}
    got = scored(index, vocab, query)
    want = brute_bm25(DOCS, {"misc": 1.0, "parse": 1.0})
    for key in DOCS:
        assert got[key] == pytest.approx(want[key])


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
