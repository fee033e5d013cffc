"""The static embedder: a weighted mean of distilled token vectors, no model run at all."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kestrel.context.tokens import STOPWORDS, split_identifier

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Vectors = npt.NDArray[np.float32]

MAX_CHARS = 2000
"""Only the start of a text is embedded: the name, signature and docstring say most."""

_WORD = re.compile(r"\w+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")
# Syntax that says nothing about what code does; STOPWORDS already covers Python's.
_SYNTAX = frozenset(
    word
    for line in (
        "const let var func fn pub impl void static public private protected final",
        "int str bool lambda async await yield raise try except finally while for assert",
        "del global nonlocal new null nil undefined this super args kwargs",
    )
    for word in line.split()
)
_WORD_CACHE = 200_000
"""Distinct words whose vectors are kept (100 MB at most); past that the cache starts over."""
_SIF_A = 1e-3
"""Smooth inverse frequency: a token of Zipf rank r weighs a / (a + p(r))."""


@lru_cache(maxsize=200_000)
def text_parts(word: str) -> tuple[str, ...]:
    """The lowercase words an identifier stands for, syntax and stopwords left out."""
    parts = split_identifier(word) if _ASCII_WORD.fullmatch(word) else [word.lower()]
    return tuple(p for p in parts if p not in STOPWORDS and p not in _SYNTAX)


def word_counts(text: str) -> Counter[str]:
    """The words of the start of `text`, as written (identifiers are split later, cached)."""
    return Counter(_WORD.findall(text[:MAX_CHARS]))


class StaticEmbedder:
    """A weighted mean of token vectors: a table look-up per word, no model run at all.

    Words are split at camelCase, snake_case and digits, each part is cut into WordPiece tokens
    (`encode_batch`, once per distinct part: code repeats its words), and a text is the sum of
    its words' vectors, each word counted sublinearly, then normalised.
    """

    def __init__(self, table: Vectors, weights: Vectors, tokenizer: Tokenizer, *, name: str):
        if tokenizer.get_vocab_size() > len(table):
            raise ValueError("the token table is smaller than the tokenizer's vocabulary")
        self._name = name
        # Weights folded in once: a token's row is already its share of a mean.
        self._table = (table.astype(np.float32) * weights[:, None]).astype(np.float32)
        self._tokenizer = tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._parts = _Rows(self.dim)
        self._words = _Rows(self.dim)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Model, package version, dimension and algorithm version."""
        return self._name

    @property
    def dim(self) -> int:
        """Columns of the table."""
        return int(self._table.shape[1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of `texts` (zero rows for texts with no words the model knows)."""
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        counted = [word_counts(t) for t in texts]
        self._learn(set().union(*counted))
        row_of = self._words.row.__getitem__
        batch = 2048  # texts per step: bounds the (pairs x dim) temporary to tens of MB
        for start in range(0, len(texts), batch):
            rows: list[int] = []
            counts: list[int] = []
            sizes: list[int] = []
            for words in counted[start : start + batch]:
                rows.extend(map(row_of, words))
                counts.extend(words.values())
                sizes.append(len(words))
            scale = (1.0 + np.log(np.asarray(counts, dtype=np.float32))).astype(np.float32)
            out[start : start + len(sizes)] = _segment_sums(self._words.matrix, rows, sizes, scale)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 1e-9)
        out[norms[:, 0] <= 1e-9] = 0.0
        return out

    def _learn(self, words: set[str]) -> None:
        """Give every new word a row: the sum of its parts' weighted token vectors."""
        new = [w for w in words if w not in self._words.row]
        if not new:
            return
        if len(self._words.row) + len(new) > _WORD_CACHE:
            # A bounded cache: start over rather than grow without end in a long session.
            self._parts, self._words = _Rows(self.dim), _Rows(self.dim)
            new = list(words)
        split = [text_parts(w) for w in new]
        parts = sorted({p for word in split for p in word if p not in self._parts.row})
        if parts:
            ids = [e.ids for e in self._tokenizer.encode_batch(parts, add_special_tokens=False)]
            flat = [i for one in ids for i in one]
            self._parts.add(parts, _segment_sums(self._table, flat, [len(x) for x in ids]))
        part_row = self._parts.row.__getitem__
        rows = [part_row(p) for word in split for p in word]
        self._words.add(new, _segment_sums(self._parts.matrix, rows, [len(w) for w in split]))


class _Rows:
    """Vectors by key in one growing matrix."""

    def __init__(self, dim: int) -> None:
        self.row: dict[str, int] = {}
        self._matrix = np.zeros((1024, dim), dtype=np.float32)

    @property
    def matrix(self) -> Vectors:
        return self._matrix[: len(self.row)]

    def add(self, keys: Sequence[str], vectors: Vectors) -> None:
        first = len(self.row)
        size = first + len(keys)
        if size > len(self._matrix):
            rows = max(size, min(2 * len(self._matrix), _WORD_CACHE))
            grown = np.zeros((rows, self._matrix.shape[1]), np.float32)
            grown[:first] = self._matrix[:first]
            self._matrix = grown
        self._matrix[first:size] = vectors
        self.row.update(zip(keys, range(first, size), strict=True))


def _segment_sums(
    matrix: Vectors, rows: Sequence[int], sizes: Sequence[int], scale: Vectors | None = None
) -> Vectors:
    """Row i is the sum of `matrix[rows[j]]` (times `scale[j]`) over segment i of `rows`.

    Segments of one length are summed together as a (count, length, dim) block: `reduceat`
    pays per segment, which made the many one-token words cost seconds.
    """
    out = np.zeros((len(sizes), matrix.shape[1]), dtype=np.float32)
    index = np.asarray(rows, dtype=np.int64)
    lengths = np.asarray(sizes, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    for length in np.unique(lengths[lengths > 0]).tolist():
        which = np.flatnonzero(lengths == length)
        at = starts[which][:, None] + np.arange(length)
        block = matrix[index[at]]
        if scale is not None:
            block *= scale[at][:, :, None]
        out[which] = block.sum(axis=1)
    return out


def sif_weights(vocab: Mapping[str, int], size: int) -> Vectors:
    """Per-token weights from a Zipf prior on vocabulary order; special tokens weigh 0.

    WordPiece vocabularies list whole tokens roughly by frequency; single characters come
    first in code-point order and are all treated as the most frequent.
    """
    weights = np.zeros(size, dtype=np.float32)
    harmonic = math.log(max(size, 2)) + 0.5772
    rank = 0
    for token, index in sorted(vocab.items(), key=lambda kv: kv[1]):
        if index >= size or (token.startswith("[") and token.endswith("]")):
            continue
        if len(token.removeprefix("##")) == 1:
            r = 1
        else:
            rank += 1
            r = rank + 1
        p = 1.0 / (r * harmonic)
        weights[index] = _SIF_A / (_SIF_A + p)
    return weights
