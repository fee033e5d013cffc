"""Fusing the signals a task gives into one ranking of files and of definitions."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Protocol

from kestrel.context.model import Symbol
from kestrel.context.query import TaskQuery

_TEST_FILE = re.compile(
    r"(^|/)(tests?|testing|__tests__|spec)/|(^|/)test_[^/]*$|_tests?\.\w+$|\.(test|spec)\.\w+$"
    r"|(^|/)conftest\.py$"
)
_DOC_FILE = re.compile(r"(^|/)(docs?|examples?|benchmarks?|asv_bench|tutorials?)/")


CLASS_KINDS = frozenset({"class", "interface", "struct", "trait"})
FRAME_WEIGHT = 0.4
"""A stack frame names where an error surfaced; the fix is often elsewhere."""


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each signal counts; tuned on the development split only."""

    lexical_file: float = 1.0
    lexical_chunk: float = 1.0
    identifier: float = 1.0
    mention: float = 1.0
    semantic: float = 0.15
    semantic_symbol: float = 0.0
    """How much a chunk close in meaning lifts its definition (more cost function accuracy)."""
    test_prior: float = 0.3
    doc_prior: float = 0.5
    text_prior: float = 0.5
    symbol_file_share: float = 0.5
    """A definition's score gains this times its file's score over the best file's."""
    symbol_file_power: float = 0.5
    """...and is multiplied by that share to this power: the best files' definitions go first."""
    class_symbol_prior: float = 0.7
    """Classes, structs and the like among definitions: fixes land in their methods more often."""


@dataclass(slots=True)
class Signals:
    """Per-file evidence, each normalised to [0, 1]."""

    lexical_file: dict[str, float] = field(default_factory=dict)
    lexical_chunk: dict[str, float] = field(default_factory=dict)
    identifier: dict[str, float] = field(default_factory=dict)
    mention: dict[str, float] = field(default_factory=dict)
    semantic: dict[str, float] = field(default_factory=dict)


@lru_cache(maxsize=1 << 17)
def is_test_path(path: str) -> bool:
    """Whether a path looks like a test file or lives in a tests directory."""
    return bool(_TEST_FILE.search(path))


@lru_cache(maxsize=1 << 17)
def is_doc_path(path: str) -> bool:
    """Whether a path lives under docs, examples or benchmarks."""
    return bool(_DOC_FILE.search(path))


def about_tests(query: TaskQuery) -> bool:
    """Whether the task names a test file, so tests should not be ranked down."""
    return any(is_test_path(p) for p in query.paths) or any(
        is_test_path(f.path) for f in query.frames
    )


def normalised(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores divided by their maximum."""
    top = max(scores.values(), default=0.0)
    if top <= 0:
        return {}
    return {k: v / top for k, v in scores.items() if v > 0}


def mention_scores(query: TaskQuery, by_suffix: PathIndex) -> dict[str, float]:
    """Files the task names: by path, dotted module or stack trace (later frames count more)."""
    scores: dict[str, float] = {}
    for path in query.paths:
        for hit in by_suffix.lookup(path):
            scores[hit] = max(scores.get(hit, 0.0), 1.0)
    for dotted in query.dotted:
        parts = dotted.split(".")
        for cut in range(len(parts), 1, -1):
            stem = "/".join(parts[:cut])
            hits = by_suffix.lookup(stem + ".py") or by_suffix.lookup(stem + "/__init__.py")
            if hits:
                for hit in hits:
                    scores[hit] = max(scores.get(hit, 0.0), 0.8 if cut == len(parts) else 0.6)
                break
    frames = query.frames
    for n, frame in enumerate(frames):
        # A trace shows where an error surfaced, often not where the fix goes: weigh it less.
        weight = FRAME_WEIGHT * (0.5 + 0.5 * (n + 1) / len(frames))
        for hit in by_suffix.lookup(frame.path):
            scores[hit] = max(scores.get(hit, 0.0), weight)
    return scores


def identifier_scores(
    query: TaskQuery, definitions_named: Callable[[str], Sequence[tuple[str, Symbol]]]
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Files and definitions whose names the task uses; rare names count more."""
    files: dict[str, float] = {}
    symbols: dict[tuple[str, str], float] = {}
    for name in query.identifiers:
        found = definitions_named(name)
        if not found:
            continue
        owners = {path for path, _ in found}
        weight = 1.0 / len(owners)
        for path, symbol in found:
            bonus = 1.5 if symbol.kind in CLASS_KINDS else 1.0
            files[path] = files.get(path, 0.0) + weight * bonus
            key = (path, symbol.qualname)
            symbols[key] = symbols.get(key, 0.0) + weight
    return files, symbols


class Kinds(Protocol):
    """What `fuse` asks about files' kinds (`kestrel.context.record.KindsOf`)."""

    def of_kind(self, kind: str, paths: Iterable[str]) -> set[str]:
        """Those of `paths` that are of `kind`."""
        ...


def fuse(signals: Signals, query: TaskQuery, w: Weights, kinds: Kinds) -> dict[str, float]:
    """One score per file: the weighted signals times the path priors."""
    tests_ok = about_tests(query)
    parts = (
        (w.lexical_file, signals.lexical_file),
        (w.lexical_chunk, signals.lexical_chunk),
        (w.identifier, normalised(signals.identifier)),
        (w.mention, signals.mention),
        (w.semantic, signals.semantic),
    )
    # Summed signal by signal, in this order for every file (what a file lacks adds 0.0, so
    # the sums are the same as file by file): a big index has thousands of candidates, and
    # one pass per signal costs a third of asking every signal about every candidate.
    fused: dict[str, float] = {}
    for weight, signal in parts:
        if not weight:
            for path in signal:
                fused.setdefault(path, 0.0)
            continue
        have = fused.get
        for path, value in signal.items():
            fused[path] = have(path, 0.0) + weight * value
    texts = kinds.of_kind("text", fused)
    for path, score in fused.items():
        if not tests_ok and is_test_path(path):
            score *= w.test_prior
        elif is_doc_path(path):
            score *= w.doc_prior
        if path in texts:
            score *= w.text_prior
        fused[path] = score
    return fused


BACKGROUND_PATHS = 20_000
"""Paths from which `PathIndex(background=True)` is built on a thread."""


class PathIndex:
    """Repository paths by their last one and last two components, for matching partial paths."""

    def __init__(self, paths: Sequence[str], *, background: bool = False) -> None:
        # Two entries per path are cheap to build on opening a big index (every tail of every
        # path took 0.3 s at 31k files); a lookup compares the mention with the few paths that
        # end with its last two components. With `background`, a big index is built on a
        # thread, so that opening returns sooner; the first use waits for it.
        self._by_name: dict[str, list[str]] = {}
        self._by_two: dict[str, list[str]] = {}
        self._filling: threading.Thread | None = None
        if background and len(paths) >= BACKGROUND_PATHS:
            self._filling = threading.Thread(
                target=self._fill, args=(paths,), name="kestrel-path-index", daemon=True
            )
            self._filling.start()
        else:
            self._fill(paths)

    def _fill(self, paths: Sequence[str]) -> None:
        for path in paths:
            for key, table in _path_keys(path, self._by_name, self._by_two):
                table.setdefault(key, []).append(path)

    def _ready(self) -> None:
        filling = self._filling
        if filling is not None:
            filling.join()
            self._filling = None

    def add(self, path: str) -> None:
        """Index one more path (one not held yet)."""
        self._ready()
        for key, table in _path_keys(path, self._by_name, self._by_two):
            table.setdefault(key, []).append(path)

    def remove(self, path: str) -> None:
        """Forget one path; absent paths are ignored."""
        self._ready()
        for key, table in _path_keys(path, self._by_name, self._by_two):
            found = table.get(key)
            if found is not None and path in found:
                found.remove(path)
                if not found:
                    del table[key]

    def lookup(self, mentioned: str) -> list[str]:
        """Paths ending with the mentioned path, at a component boundary; longest match wins."""
        self._ready()
        mentioned = mentioned.strip().lstrip("./")
        parts = tuple(part for part in PurePosixPath(mentioned).parts if part != "/")
        if len(parts) >= 2:
            candidates = self._by_two.get("/".join(parts[-2:]), [])
            for cut in range(len(parts) - 1):
                tail = "/".join(parts[cut:])
                ending = "/" + tail
                found = [p for p in candidates if p == tail or p.endswith(ending)]
                if found:
                    return found if len(found) <= 3 else []
        found = self._by_name.get(parts[-1], []) if parts else []
        return list(found) if 0 < len(found) <= 3 else []


def _path_keys(
    path: str, by_name: dict[str, list[str]], by_two: dict[str, list[str]]
) -> list[tuple[str, dict[str, list[str]]]]:
    head, _, name = path.rpartition("/")
    keys = [(name, by_name)]
    if head:
        keys.append((f"{head.rpartition('/')[2]}/{name}", by_two))
    return keys
