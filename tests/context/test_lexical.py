"""BM25 postings: scores match a direct computation, and updates keep them exact."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kestrel.context.lexical import Bm25Index, Vocabulary
from kestrel.context.tokens import path_tokens, split_identifier, stem, tokens


def brute_bm25(
    docs: dict[str, dict[str, float]], query: dict[str, float], k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    n = len(docs)
    avg = sum(sum(d.values()) for d in docs.values()) / n
    out = {}
    for key, doc in docs.items():
        length = sum(doc.values())
        score = 0.0
        for term, qw in query.items():
            df = sum(1 for d in docs.values() if term in d)
            if term not in doc or df == 0 or (n > 50 and df > 0.6 * n):
                continue
            idf = math.log1p((n - df + 0.5) / (df + 0.5))
            tf = doc[term]
            score += qw * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        out[key] = score
    return out


def scored(index: Bm25Index, vocab: Vocabulary, query: dict[str, float]) -> dict[str, float]:
    qvec = {vocab.intern(t): w for t, w in query.items()}
    raw = index.scores(qvec)
    return {key: float(raw[i]) for i in range(len(raw)) if (key := index.key_of(i)) in index}


DOCS = {
    "a.py": {"parse": 3, "config": 1, "load": 2},
    "b.py": {"render": 2, "template": 4},
    "c.py": {"parse": 1, "template": 1, "cache": 5},
    "d.py": {"cache": 1, "load": 1},
    "e.py": {"misc": 1},
}


def build(docs: dict[str, dict[str, float]]) -> tuple[Bm25Index, Vocabulary]:
    vocab = Vocabulary()
    index = Bm25Index()
    index.bulk_load((k, *vocab.vector(d)) for k, d in docs.items())
    return index, vocab


def test_scores_match_the_formula() -> None:
    index, vocab = build(DOCS)
    query = {"parse": 1.0, "cache": 2.0, "template": 1.0}
    got = scored(index, vocab, query)
    want = brute_bm25(DOCS, query)
    for key in DOCS:
        assert got[key] == pytest.approx(want[key])


def test_updates_and_removals_stay_exact() -> None:
    index, vocab = build(DOCS)
    docs = dict(DOCS)
    docs["c.py"] = {"render": 1, "load": 7}
    index.put("c.py", *vocab.vector(docs["c.py"]))
    del docs["b.py"]
    index.remove("b.py")
    docs["f.py"] = {"parse": 2, "template": 2}
    index.put("f.py", *vocab.vector(docs["f.py"]))
    query = {"parse": 1.0, "load": 1.0, "template": 1.0, "render": 1.0}
    got = scored(index, vocab, query)
    want = brute_bm25(docs, query)
    assert set(got) == set(docs)
    for key in docs:
        assert got[key] == pytest.approx(want[key])


def test_many_updates_stay_exact_and_ask_for_a_rebuild() -> None:
    vocab = Vocabulary()
    index = Bm25Index()
    docs = {f"f{i}.py": {f"t{i % 7}": 1.0 + i % 3, "common": 1.0} for i in range(3000)}
    index.bulk_load((k, *vocab.vector(d)) for k, d in docs.items())
    for i in range(0, 3000, 2):
        docs[f"f{i}.py"] = {f"t{(i + 1) % 7}": 2.0}
        index.put(f"f{i}.py", *vocab.vector(docs[f"f{i}.py"]))
    query = {"t3": 1.0, "t4": 0.5}
    got = scored(index, vocab, query)
    sample = {k: docs[k] for k in list(docs)[:40]}
    want = brute_bm25(docs, query)
    for key in sample:
        assert got[key] == pytest.approx(want[key])
    assert len(index) == 3000
    assert index.crowded()  # half the documents replaced: the owner should rebuild
    index.bulk_load((k, *vocab.vector(d)) for k, d in docs.items())
    assert not index.crowded()


def test_queries_between_single_updates_stay_exact_with_few_segments() -> None:
    vocab = Vocabulary()
    index = Bm25Index()
    docs = {f"f{i}.py": {f"t{i % 5}": 1.0, "common": 1.0} for i in range(600)}
    index.bulk_load((k, *vocab.vector(d)) for k, d in docs.items())
    query = {"t1": 1.0, "t2": 0.5, "fresh": 1.0}
    for i in range(300):  # a query after every update, as a session asks between edits
        key = f"f{(7 * i) % 600}.py"
        docs[key] = {f"t{(i + 1) % 5}": 2.0, "fresh": float(i % 3)}
        index.put(key, *vocab.vector(docs[key]))
        if i % 10 == 0:
            index.remove(f"f{i}.py")
            docs.pop(f"f{i}.py", None)
        got = scored(index, vocab, query)
        assert len(index._segments()) <= 1 + 8  # the base and at most eight more
    want = brute_bm25(docs, query)
    assert set(got) == set(docs)
    for key in docs:
        assert got[key] == pytest.approx(want[key])


def test_empty_index_and_unknown_terms() -> None:
    index = Bm25Index()
    assert index.scores({3: 1.0}).shape == (0,)
    full, vocab = build(DOCS)
    assert not np.any(full.scores({vocab.intern("nowhere"): 1.0}))


def test_identifiers_are_kept_whole_and_split() -> None:
    assert split_identifier("parseHTTPResponse_v2") == ["parse", "http", "response", "v", "2"]
    got = tokens("def load_config(self): return XMLParser()")
    assert "load_config" in got and "load" in got and "config" in got
    assert "xmlpars" in got and "xml" in got and "pars" in got  # stemmed: parser, parsers
    assert stem("migrations") == stem("migration") == stem("migrate")
    assert stem("serialization") == stem("serializer") == stem("serialize")
    assert stem("values") == stem("value") and stem("classes") == stem("class")
    assert stem("status") == "status" and stem("x2") == "x2"
    assert "self" not in got and "def" not in got
    assert path_tokens("src/kestrel/context/index_store.py") == [
        "src",
        "kestrel",
        "context",
        "index_store",
        "index",
        "stor",
        "py",
    ]


def test_bulk_load_with_empty_documents_anywhere() -> None:
    docs = {"empty0": {}, "a": {"x": 2.0}, "mid": {}, "b": {"x": 1.0, "y": 3.0}, "last": {}}
    index, vocab = build(docs)  # type: ignore[arg-type]
    query = {"x": 1.0, "y": 1.0}
    got = scored(index, vocab, query)
    want = brute_bm25(docs, query)  # type: ignore[arg-type]
    for key in docs:
        assert got[key] == pytest.approx(want[key])
