"""What the learned ranker reads about each candidate file: one row of numbers per file.

The signals the engine already fuses by hand (lexical, identifier, mention, semantic and the
fused score itself) come with the evidence behind them (how many definitions matched, how many
names the task uses are defined there), the path's words the task shares, and what kind of file
it is. Every feature is cheap to compute from the index alone: a query scores a few hundred
candidates in a few milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

import numpy as np

from kestrel.context.history import History
from kestrel.context.query import TaskQuery
from kestrel.context.rank import CLASS_KINDS, Signals, about_tests, is_doc_path, is_test_path
from kestrel.context.tokens import path_tokens, stem

FILE_FEATURES = (
    "lexical_file",
    "lexical_chunk",
    "identifier",
    "mention",
    "semantic",
    "fused",
    "fused_rank",
    "lexical_rank",
    "chunk_rank",
    "chunk_hits",
    "names_defined",
    "path_share",
    "path_hits",
    "stem_named",
    "test",
    "doc",
    "text",
    "package_init",
    "log_size",
    "log_chunks",
    "depth",
    "churn",
    "recency",
    "has_history",
    "similar",
    "similar_rank",
)
"""Feature names, in column order; a trained model names the ones it was trained on."""

CANDIDATES = 100
"""How many of the hand-fused ranking's best files the learned ranker reorders."""


@dataclass(slots=True)
class Evidence:
    """What one query found, beyond the per-file signals."""

    signals: Signals
    chunk_hits: dict[str, int] = field(default_factory=dict)
    """Matching definition chunks per file (among the pool the engine scores)."""
    names_defined: dict[str, int] = field(default_factory=dict)
    """Distinct names from the task that a file defines."""


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What the index knows about a file without reading its body."""

    size: int
    chunks: int
    kind: str


@lru_cache(maxsize=1 << 17)
def _path_terms(path: str) -> frozenset[str]:
    return frozenset(path_tokens(path))


@lru_cache(maxsize=1 << 17)
def _stem_terms(path: str) -> frozenset[str]:
    name = PurePosixPath(path).stem
    if name == "__init__":
        name = PurePosixPath(path).parent.name
    return frozenset(path_tokens(name)) | {stem(name.lower())}


def _reciprocal_ranks(scores: Mapping[str, float]) -> dict[str, float]:
    """1 / rank of each file by `scores`, ties by path: 1.0 for the best."""
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return {path: 1.0 / (n + 1) for n, (path, _) in enumerate(ordered)}


def file_rows(
    paths: Sequence[str],
    evidence: Evidence,
    fused: Mapping[str, float],
    query: TaskQuery,
    facts: Mapping[str, FileFacts],
    history: History | None = None,
) -> np.ndarray:
    """One row of FILE_FEATURES per path, in the order given."""
    s = evidence.signals
    top = max(fused.values(), default=0.0) or 1.0
    fused_rank = _reciprocal_ranks({p: fused.get(p, 0.0) for p in paths})
    lexical_rank = _reciprocal_ranks(s.lexical_file)
    chunk_rank = _reciprocal_ranks(s.lexical_chunk)
    ident_top = max(s.identifier.values(), default=0.0) or 1.0
    tests_ok = about_tests(query)
    terms = query.terms
    similar = history.similar(terms) if history else {}
    similar_rank = _reciprocal_ranks(similar)
    rows = np.zeros((len(paths), len(FILE_FEATURES)), dtype=np.float32)
    for n, path in enumerate(paths):
        fact = facts.get(path, FileFacts(0, 0, "code"))
        words = _path_terms(path)
        hits = sum(1 for w in words if w in terms)
        rows[n] = (
            s.lexical_file.get(path, 0.0),
            s.lexical_chunk.get(path, 0.0),
            s.identifier.get(path, 0.0) / ident_top,
            s.mention.get(path, 0.0),
            s.semantic.get(path, 0.0),
            fused.get(path, 0.0) / top,
            fused_rank.get(path, 0.0),
            lexical_rank.get(path, 0.0),
            chunk_rank.get(path, 0.0),
            math.log1p(evidence.chunk_hits.get(path, 0)),
            math.log1p(evidence.names_defined.get(path, 0)),
            hits / len(words) if words else 0.0,
            math.log1p(hits),
            0.0 if _stem_terms(path).isdisjoint(terms) else 1.0,
            1.0 if not tests_ok and is_test_path(path) else 0.0,
            1.0 if is_doc_path(path) else 0.0,
            1.0 if fact.kind == "text" else 0.0,
            1.0 if path.endswith("__init__.py") else 0.0,
            math.log1p(fact.size / 1024),
            math.log1p(fact.chunks),
            float(path.count("/")),
            history.churn(path) if history else 0.0,
            history.recency(path) if history else 0.0,
            1.0 if history else 0.0,
            similar.get(path, 0.0),
            similar_rank.get(path, 0.0),
        )
    return rows


DEFINITION_FEATURES = (
    "total",
    "total_rank",
    "within",
    "within_file_rank",
    "chunk",
    "named",
    "file_share",
    "file_rank",
    "class",
    "method",
    "private",
    "dunder",
    "init",
    "name_hits",
    "name_share",
    "owner_named",
    "log_lines",
)
"""What a definition's row holds, in column order."""


@dataclass(frozen=True, slots=True)
class DefinitionFacts:
    """A candidate definition as the engine scored it."""

    path: str
    qualname: str
    kind: str
    lines: int
    total: float
    within: float
    chunk: float
    named: float


def definition_rows(
    found: Sequence[DefinitionFacts],
    query: TaskQuery,
    file_share: Mapping[str, float],
    file_rank: Mapping[str, float],
) -> np.ndarray:
    """One row of DEFINITION_FEATURES per candidate definition, in the order given."""
    top = max((d.total for d in found), default=0.0) or 1.0
    top_within = max((d.within for d in found), default=0.0) or 1.0
    total_rank = _reciprocal_ranks({f"{d.path}\0{d.qualname}": d.total for d in found})
    by_file: dict[str, dict[str, float]] = {}
    for d in found:
        by_file.setdefault(d.path, {})[d.qualname] = d.within
    in_file = {path: _reciprocal_ranks(scores) for path, scores in by_file.items()}
    terms = query.terms
    named = {name.lower() for name in query.identifiers}
    rows = np.zeros((len(found), len(DEFINITION_FEATURES)), dtype=np.float32)
    for n, d in enumerate(found):
        last = d.qualname.rsplit(".", 1)[-1]
        words = _path_terms(d.qualname.replace(".", " "))
        hits = sum(1 for w in words if w in terms)
        owner = d.qualname.split(".", 1)[0] if "." in d.qualname else ""
        dunder = last.startswith("__") and last.endswith("__")
        rows[n] = (
            d.total / top,
            total_rank[f"{d.path}\0{d.qualname}"],
            d.within / top_within,
            in_file[d.path][d.qualname],
            d.chunk,
            d.named,
            file_share.get(d.path, 0.0),
            file_rank.get(d.path, 0.0),
            1.0 if d.kind in CLASS_KINDS else 0.0,
            1.0 if "." in d.qualname else 0.0,
            1.0 if last.startswith("_") and not dunder else 0.0,
            1.0 if dunder else 0.0,
            1.0 if last == "__init__" else 0.0,
            math.log1p(hits),
            hits / len(words) if words else 0.0,
            1.0 if owner and owner.lower() in named else 0.0,
            math.log1p(max(d.lines, 0)),
        )
    return rows
