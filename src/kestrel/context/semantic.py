"""Exact vector search over every live chunk: one matrix-vector product per query.

Each file owns a block of rows (its definitions, then the file itself). The rows are stacked
into one float32 matrix only when a query needs it; a changed file goes to a small delta matrix
and its old rows are masked, so an edit costs no restacking until the delta grows large.

Rows and queries are compared after subtracting the mean of all rows: what every chunk of a
repository shares (its language, its conventions) says nothing about which one a task is about,
and averaged word vectors share a lot. On django's development tasks this moved the gold file's
median rank by meaning alone from 7.5 to 3.5.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.floating]
F32 = npt.NDArray[np.float32]

_DELTA_SHARE = 0.2
"""Restack everything once the delta holds this share of all rows."""
_DELTA_MIN_ROWS = 4096


@dataclass(frozen=True, slots=True)
class SemanticHits:
    """The best files (by their best row) and the best rows, as centred cosine similarities."""

    files: dict[str, float] = field(default_factory=dict)
    rows: list[tuple[str, int, float]] = field(default_factory=list)
    """(key, row within the key's block, score), best first."""


class _Block:
    """Rows of several keys stacked and centred: `starts[i]` is where key i's rows begin."""

    def __init__(self, items: Mapping[str, Vectors], dim: int, centre: F32 | None = None) -> None:
        self.keys = list(items)
        self.alive = np.ones(len(self.keys), dtype=bool)
        self.slot = {key: n for n, key in enumerate(self.keys)}
        sizes = np.fromiter((len(v) for v in items.values()), dtype=np.int64, count=len(items))
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.owner = np.repeat(np.arange(len(self.keys), dtype=np.int64), sizes)
        self.local = np.arange(len(self.owner), dtype=np.int64) - self.starts[self.owner]
        # Built in place: on a 20,000-file tree the matrix alone is 100 MB.
        matrix = np.empty((int(sizes.sum()), dim), dtype=np.float32)
        if items:
            np.concatenate(list(items.values()), out=matrix, casting="same_kind")
        # Zero rows (texts without words) stay zero: centred, they would point somewhere.
        real = np.einsum("ij,ij->i", matrix, matrix) > 1e-12
        if centre is None:
            centre = matrix.sum(axis=0) / max(int(real.sum()), 1)
        self.centre: F32 = np.asarray(centre, dtype=np.float32)
        matrix -= self.centre
        matrix[~real] = 0.0
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        np.divide(matrix, norms[:, None], out=matrix, where=norms[:, None] > 1e-6)
        self.matrix: F32 = matrix

    def scores(self, query: F32) -> npt.NDArray[np.float32]:
        # einsum, not `@`: a BLAS call wakes its worker threads, which then spin for a while
        # and slow the rest of the query on a machine with few cores; one core is fast enough.
        out: npt.NDArray[np.float32] = np.einsum("ij,j->i", self.matrix, query)
        if not self.alive.all():
            out[~self.alive[self.owner]] = -np.inf
        return out


class VectorIndex:
    """Chunk vectors by key (a path), searched exactly; rows of a removed key never score."""

    def __init__(self) -> None:
        self._vectors: dict[str, Vectors] = {}
        self._base: _Block | None = None
        self._delta_keys: set[str] = set()
        self._delta: _Block | None = None
        self._delta_rows = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, key: str) -> bool:
        return key in self._vectors

    def bulk_load(self, items: Iterable[tuple[str, Vectors]]) -> None:
        """Replace everything; stacking waits for the first query."""
        self._vectors = {key: vectors for key, vectors in items if len(vectors)}
        self._base = self._delta = None
        self._delta_keys = set()
        self._delta_rows = 0

    def put(self, key: str, vectors: Vectors) -> None:
        """Add or replace the rows of one key."""
        self.remove(key)
        if not len(vectors):
            return
        self._vectors[key] = vectors
        if self._base is None:
            return
        self._delta_keys.add(key)
        self._delta = None
        self._delta_rows += len(vectors)
        if self._delta_rows > max(_DELTA_MIN_ROWS, _DELTA_SHARE * len(self._base.matrix)):
            self._base = None  # Restacked on the next query, delta folded in.

    def remove(self, key: str) -> None:
        """Drop the rows of one key; absent keys are ignored."""
        if self._vectors.pop(key, None) is None:
            return
        if self._base is not None and (slot := self._base.slot.get(key)) is not None:
            self._base.alive[slot] = False
        if key in self._delta_keys:
            self._delta_keys.discard(key)
            self._delta = None

    def search(self, query: Vectors, *, files: int, rows: int) -> SemanticHits:
        """The `files` keys whose best row scores highest, and the `rows` best rows."""
        if not self._vectors:
            return SemanticHits()
        blocks = self._blocks(len(query))
        q = _unit_rows((np.asarray(query, dtype=np.float32) - blocks[0].centre)[None])[0]
        best: dict[str, float] = {}
        found: list[tuple[str, int, float]] = []
        for block in blocks:
            if not len(block.matrix):
                continue
            scores = block.scores(q)
            per_key = np.maximum.reduceat(scores, block.starts)
            for slot in _top(per_key, files):
                best[block.keys[slot]] = float(per_key[slot])
            for row in _top(scores, rows):
                key = block.keys[int(block.owner[row])]
                found.append((key, int(block.local[row]), float(scores[row])))
        top_files = sorted(best.items(), key=lambda kv: -kv[1])[:files]
        found.sort(key=lambda hit: -hit[2])
        return SemanticHits(files=dict(top_files), rows=found[:rows])

    def _blocks(self, dim: int) -> list[_Block]:
        if self._base is None:
            self._base = _Block(self._vectors, dim)
            self._delta_keys = set()
            self._delta = None
            self._delta_rows = 0
        if not self._delta_keys:
            return [self._base]
        if self._delta is None:
            changed = {k: self._vectors[k] for k in sorted(self._delta_keys)}
            self._delta = _Block(changed, dim, self._base.centre)
        return [self._base, self._delta]

    @property
    def centre(self) -> F32 | None:
        """The mean row subtracted from rows and queries, once the rows are stacked."""
        return None if self._base is None else self._base.centre


def _unit_rows(x: F32) -> F32:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: F32 = np.divide(x, norms, out=np.zeros_like(x), where=norms > 1e-6)
    return out


def _top(scores: npt.NDArray[np.float32], n: int) -> list[int]:
    """Indices of the `n` highest finite scores, in no particular order."""
    if n <= 0 or not len(scores):
        return []
    picked = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    kept: list[int] = picked[np.isfinite(scores[picked])].tolist()
    return kept


def spread(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped onto [0, 1] between the lowest and the highest of the pool.

    Cosine similarities of unrelated text are far from zero, so dividing by the maximum would
    leave every candidate close to 1; the pool's floor is what "unrelated" means here.
    """
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= 0:
        return {}
    if high - low < 1e-9:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items() if value > low}
