"""A big index keeps its length normalisation while the average length barely moves."""

from __future__ import annotations

import pytest
from test_lexical import brute_bm25, scored

from kestrel.context.lexical import Bm25Index, Vocabulary

BIG = 12_000  # over the size below which the normalisation is redone on any change


def _big() -> tuple[Bm25Index, Vocabulary, dict[str, dict[str, float]]]:
    docs = {f"d{n}.py": {"alpha": 1 + n % 3, f"w{n % 50}": 2} for n in range(BIG)}
    docs["target.py"] = {"alpha": 2, "rare": 1}
    vocab = Vocabulary()
    index = Bm25Index()
    index.bulk_load((k, *vocab.vector(d)) for k, d in docs.items())
    return index, vocab, docs


def test_one_more_document_reuses_the_normalisation_and_is_scored() -> None:
    index, vocab, docs = _big()
    before = scored(index, vocab, {"rare": 1.0, "alpha": 1.0})
    index.put("new.py", *vocab.vector({"rare": 3, "alpha": 1}))
    after = scored(index, vocab, {"rare": 1.0, "alpha": 1.0})
    docs["new.py"] = {"rare": 3, "alpha": 1}
    exact = brute_bm25(docs, {"rare": 1.0, "alpha": 1.0})
    # The average moved by a ten-thousandth: scores stay within that of exact BM25.
    for key in ("target.py", "new.py", "d7.py"):
        assert after[key] == pytest.approx(exact[key], rel=1e-3)
    assert after["new.py"] > after["target.py"] > 0
    assert before["d7.py"] == pytest.approx(after["d7.py"], rel=1e-3)


def test_a_moved_average_redoes_the_normalisation() -> None:
    index, vocab, docs = _big()
    scored(index, vocab, {"alpha": 1.0})
    long_doc = {f"x{n}": 5 for n in range(400)}
    for n in range(40):  # 40 long documents move the average by far more than a thousandth
        index.put(f"long{n}.py", *vocab.vector({**long_doc, "alpha": 1}))
        docs[f"long{n}.py"] = {**long_doc, "alpha": 1}
    got = scored(index, vocab, {"alpha": 1.0, "rare": 1.0})
    exact = brute_bm25(docs, {"alpha": 1.0, "rare": 1.0})
    for key in ("target.py", "long3.py", "d7.py"):
        assert got[key] == pytest.approx(exact[key], rel=1e-9)
