"""Ranking one query over the context engine's index: the signals a task gives, fused per file
(by hand, then by the learned file model when it is on), then the candidate definitions scored
and (by default) reordered by the learned definition model.

These functions read the engine's index under its lock (the engine's `search` holds it); they
are the engine's query side, kept apart from its indexing and freshness code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from kestrel.context.features import (
    CANDIDATES,
    DefinitionFacts,
    Evidence,
    FileFacts,
    definition_rows,
    file_rows,
)
from kestrel.context.lexical import Bm25Index, ScoreArray
from kestrel.context.model import FileHit, Symbol, SymbolHit
from kestrel.context.postings import CHUNK_SEP
from kestrel.context.query import TaskQuery, parse_query
from kestrel.context.rank import (
    CLASS_KINDS,
    Signals,
    fuse,
    identifier_scores,
    mention_scores,
    normalised,
)
from kestrel.context.record import prefetch_definitions
from kestrel.context.segments import best_slots
from kestrel.context.semantic import spread

if TYPE_CHECKING:
    from kestrel.context.engine import ContextEngine

_CHUNK_POOL = 3000
MAX_NAME_DEFINITIONS = 5000
"""Names defined more often than this are left out of the identifier signal (`_named`)."""
_SEMANTIC_FILES = 200
_SEMANTIC_ROWS = 200


class _Found(NamedTuple):
    """What one query found in the index."""

    evidence: Evidence
    chunk_hits: list[tuple[str, str, float]]
    chunk_norm: float
    ident_symbols: dict[tuple[str, str], float]
    semantic_symbols: dict[tuple[str, str], float]


class _Scored(NamedTuple):
    """A candidate definition: its score overall, and within its own file."""

    total: float
    within: float
    path: str
    symbol: Symbol
    chunk: float = 0.0
    """Its chunk's BM25 over the best chunk's."""
    named: float = 0.0
    """What the task's identifiers (and meaning, when on) add."""


def rank(
    engine: ContextEngine, query: TaskQuery, k: int, per_file: int
) -> tuple[tuple[FileHit, ...], tuple[SymbolHit, ...]]:
    found = _gather(engine, query)
    held = engine._post.held
    ranked, file_share = _order_files(engine, found, query)
    scored = _score_definitions(engine, found, file_share)
    # Ties go by path, line and name; (path, qualname) is unique.
    scored.sort(key=lambda d: (-d.total, d.path, d.symbol.line, d.symbol.qualname))
    wanted = max(k * per_file, 10)
    if engine.definition_ranker is not None and scored:
        best = _rerank_definitions(engine, scored, query, ranked, file_share)
        overall = [_symbol_hit(d.path, d.symbol, share) for d, share in best[:wanted]]
    else:
        overall = [_symbol_hit(d.path, d.symbol, d.total) for d in scored[:wanted]]
    # A file's own list keeps classes at their full score: a class shown whole holds
    # the methods that matched in it.
    shown = {path for path, _ in ranked[:k]}
    per_path: dict[str, list[SymbolHit]] = {}
    ours = (d for d in scored if d.path in shown)
    for d in sorted(ours, key=lambda d: (-d.within, d.path, d.symbol.line, d.symbol.qualname)):
        mine = per_path.setdefault(d.path, [])
        if len(mine) < per_file:
            mine.append(_symbol_hit(d.path, d.symbol, d.total))
    hits = tuple(
        FileHit(
            path=path,
            score=round(score, 6),
            content_hash=held[path].content_hash,
            symbols=tuple(per_path.get(path, ())),
        )
        for path, score in ranked[:k]
    )
    return hits, tuple(overall)


def _score_definitions(
    engine: ContextEngine, found: _Found, file_share: dict[str, float]
) -> list[_Scored]:
    """Every candidate definition in the files that can be served, scored (unsorted)."""
    w = engine.weights
    held = engine._post.held
    # Definitions are looked up only in files that can still be served.
    prefetch_definitions(
        (held[path], int(index)) for path, index, _ in found.chunk_hits if path in file_share
    )
    chunk_part: dict[tuple[str, str], float] = {}
    defined: dict[tuple[str, str], Symbol] = {}
    for path, index, score in found.chunk_hits:
        if path not in file_share:
            continue
        symbol = engine._symbol(path, int(index))
        if symbol is not None:
            key = (path, symbol.qualname)
            # A definition's best chunk counts, whatever order the chunks come in.
            chunk_part[key] = max(chunk_part.get(key, 0.0), score / found.chunk_norm)
            defined.setdefault(key, symbol)
    named_part: dict[tuple[str, str], float] = {}
    for which, bonus in (*found.ident_symbols.items(), *found.semantic_symbols.items()):
        named_part[which] = named_part.get(which, 0.0) + bonus
    scored: list[_Scored] = []
    for key in chunk_part.keys() | named_part.keys():
        path, qualname = key
        if path not in file_share:
            continue
        symbol = defined.get(key) or engine._named_symbol(path, qualname)
        if symbol is None:
            continue
        share = file_share[path]
        chunk, named = chunk_part.get(key, 0.0), named_part.get(key, 0.0)
        within = chunk + named + w.symbol_file_share * share
        total = within * share**w.symbol_file_power
        if symbol.kind in CLASS_KINDS:
            total *= w.class_symbol_prior
        scored.append(_Scored(total, within, path, symbol, chunk, named))
    return scored


def _gather(engine: ContextEngine, query: TaskQuery) -> _Found:
    """Every signal the task gives, per file, and the matching definition chunks."""
    qvec: dict[int, float] = {}
    for term, count in query.terms.items():
        term_id = engine._vocab.get(term)
        if term_id is not None:
            qvec[term_id] = 1.0 + math.log(count)
    post = engine._post
    signals = Signals()
    file_scores = post.files.scores(qvec)
    signals.lexical_file = normalised(_top(post.files, file_scores, 500))
    chunk_top = _top(post.chunks, post.chunks.scores(qvec), _CHUNK_POOL)
    best_chunk: dict[str, float] = {}
    hits_per_file: dict[str, int] = {}
    chunk_hits: list[tuple[str, str, float]] = []
    for key, score in chunk_top.items():
        path, _, index = key.partition(CHUNK_SEP)
        if score > best_chunk.get(path, 0.0):
            best_chunk[path] = score
        hits_per_file[path] = hits_per_file.get(path, 0) + 1
        chunk_hits.append((path, index, score))
    signals.lexical_chunk = normalised(best_chunk)
    semantic_symbols: dict[tuple[str, str], float] = {}
    signals.semantic = _semantic(engine, query, semantic_symbols)
    signals.identifier, ident_symbols = identifier_scores(query, _named(engine))
    signals.mention = mention_scores(query, engine._path_index)
    names: dict[str, int] = {}
    for path, _ in ident_symbols:
        names[path] = names.get(path, 0) + 1
    return _Found(
        Evidence(signals, hits_per_file, names),
        chunk_hits,
        max(chunk_top.values(), default=0.0) or 1.0,
        ident_symbols,
        semantic_symbols,
    )


def _named(engine: ContextEngine) -> Callable[[str], Sequence[tuple[str, Symbol]]]:
    """Definitions by name for the identifier signal, leaving out names defined more than
    `MAX_NAME_DEFINITIONS` times: each of those weighs under 1/5,000 per file, while listing
    them cost a big index (`__init__`: 66,000 definitions at 250,000 files) a tenth of a
    second per query."""

    def named(name: str) -> Sequence[tuple[str, Symbol]]:
        if engine.definition_count(name) > MAX_NAME_DEFINITIONS:
            return []
        return engine.definitions_named(name)

    return named


def _order_files(
    engine: ContextEngine, found: _Found, query: TaskQuery
) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """Files best first with their scores, and the best 200's share of the top score."""
    fused = fuse(found.evidence.signals, query, engine.weights, engine._kinds)
    ranked = _servable(engine, fused)
    if engine.ranker is not None and ranked:
        ranked = _rerank_files(engine, ranked, found.evidence, fused, query)
    top_file = ranked[0][1] if ranked else 1.0
    file_share = {p: s / top_file for p, s in ranked[:200]} if top_file > 0 else {}
    return ranked, file_share


def _servable(engine: ContextEngine, fused: dict[str, float]) -> list[tuple[str, float]]:
    """The fused files the index can serve now, best first (ties by path)."""
    # Set operations on the key views run in C: thousands of candidates per query.
    paths = fused.keys() & engine._post.held.keys()
    if engine._pending:
        paths -= engine._pending
    return sorted(((p, fused[p]) for p in paths), key=lambda kv: (-kv[1], kv[0]))


def _rerank_files(
    engine: ContextEngine,
    ranked: list[tuple[str, float]],
    evidence: Evidence,
    fused: dict[str, float],
    query: TaskQuery,
) -> list[tuple[str, float]]:
    """The learned model's order of the best candidates, scores as softmax shares."""
    assert engine.ranker is not None
    head = [p for p, _ in ranked[:CANDIDATES]]
    rows = file_rows(head, evidence, fused, query, _facts(engine, head), engine.history)
    learned = engine.ranker.score(rows)
    shares = np.exp(learned - learned.max())
    order = sorted(zip(head, shares.tolist(), strict=True), key=lambda kv: (-kv[1], kv[0]))
    floor = order[-1][1]
    rest = ranked[CANDIDATES:]
    last = ranked[CANDIDATES - 1][1] if rest and ranked[CANDIDATES - 1][1] > 0 else 1.0
    return order + [(p, floor * min(1.0, s / last) * 0.5) for p, s in rest]


def _facts(engine: ContextEngine, paths: Sequence[str]) -> dict[str, FileFacts]:
    held = engine._post.held
    records = [held[p] for p in paths if p in held]
    return {r.path: FileFacts(r.size, r.chunk_count, r.kind) for r in records}


def file_features(engine: ContextEngine, text: str) -> tuple[list[str], np.ndarray]:
    """The candidate files the learned ranker would reorder and their feature rows."""
    engine._read_history()
    with engine._lock:
        engine.catch_up()
        query = parse_query(text)
        found = _gather(engine, query)
        fused = fuse(found.evidence.signals, query, engine.weights, engine._kinds)
        ranked = _servable(engine, fused)
        head = [p for p, _ in ranked[:CANDIDATES]]
        facts = _facts(engine, head)
        return head, file_rows(head, found.evidence, fused, query, facts, engine.history)


def definition_features(engine: ContextEngine, text: str) -> tuple[list[str], np.ndarray]:
    """The best 100 hand-scored definitions (`path::qualname`) and their feature rows."""
    with engine._lock:
        engine.catch_up()
        query = parse_query(text)
        found = _gather(engine, query)
        ranked, file_share = _order_files(engine, found, query)
        scored = _score_definitions(engine, found, file_share)
        scored.sort(key=lambda d: (-d.total, d.path, d.symbol.line, d.symbol.qualname))
        best = scored[:CANDIDATES]
        keys = [f"{d.path}::{d.symbol.qualname}" for d in best]
        return keys, _definition_rows(engine, best, query, ranked, file_share)


def _definition_rows(
    engine: ContextEngine,
    best: Sequence[_Scored],
    query: TaskQuery,
    ranked: Sequence[tuple[str, float]],
    file_share: dict[str, float],
) -> np.ndarray:
    file_rank = {path: 1.0 / (n + 1) for n, (path, _) in enumerate(ranked[:200])}
    facts = [
        DefinitionFacts(
            d.path,
            d.symbol.qualname,
            d.symbol.kind,
            d.symbol.end_line - d.symbol.line,
            d.total,
            d.within,
            d.chunk,
            d.named,
        )
        for d in best
    ]
    return definition_rows(facts, query, file_share, file_rank)


def _rerank_definitions(
    engine: ContextEngine,
    scored: Sequence[_Scored],
    query: TaskQuery,
    ranked: Sequence[tuple[str, float]],
    file_share: dict[str, float],
) -> list[tuple[_Scored, float]]:
    """The learned model's order of the best definitions, scores as softmax shares; the
    rest follow in the hand order, below the last of them."""
    assert engine.definition_ranker is not None
    best = scored[:CANDIDATES]
    learned = engine.definition_ranker.score(
        _definition_rows(engine, best, query, ranked, file_share)
    )
    shares = np.exp(learned - learned.max()).tolist()
    order = sorted(
        zip(best, shares, strict=True),
        key=lambda ds: (-ds[1], ds[0].path, ds[0].symbol.line, ds[0].symbol.qualname),
    )
    floor = order[-1][1] * 0.5
    return order + [(d, floor) for d in scored[CANDIDATES:]]


def _semantic(
    engine: ContextEngine, query: TaskQuery, symbol_scores: dict[tuple[str, str], float]
) -> dict[str, float]:
    """Files by their chunk closest in meaning to the task; close chunks lift definitions."""
    w = engine.weights
    if (
        engine._embedder is None
        or not len(engine._post.vectors)
        or w.semantic + w.semantic_symbol <= 0
    ):
        return {}
    vector = engine._embedder.embed([query.text])[0]
    if not vector.any():
        return {}
    hits = engine._post.vectors.search(vector, files=_SEMANTIC_FILES, rows=_SEMANTIC_ROWS)
    rows = spread({f"{path}{CHUNK_SEP}{i}": score for path, i, score in hits.rows})
    for key, score in rows.items():
        path, _, index = key.partition(CHUNK_SEP)
        symbol = engine._symbol(path, int(index))  # None for the file's own row
        if symbol is not None:
            named = (path, symbol.qualname)
            symbol_scores[named] = symbol_scores.get(named, 0.0) + w.semantic_symbol * score
    return spread(hits.files)


def _symbol_hit(path: str, symbol: Symbol, score: float) -> SymbolHit:
    return SymbolHit(
        path=path,
        qualname=symbol.qualname,
        kind=symbol.kind,
        line=symbol.line,
        end_line=symbol.end_line,
        signature=symbol.signature,
        score=round(score, 6),
    )


def _top(index: Bm25Index, scores: ScoreArray, n: int) -> dict[str, float]:
    # Only the slots some term reached are ordered: a few of millions of chunks.
    positive = best_slots(scores, n)
    return dict(zip(index.keys_of(positive.tolist()), scores[positive].tolist(), strict=True))
