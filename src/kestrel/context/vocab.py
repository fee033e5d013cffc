"""Term strings to dense integer ids, held in memory or looked up in a snapshot until needed."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, overload

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float32]


class StoredTerms(Protocol):
    """Terms kept outside memory (a mapped snapshot): ids 0 to `count` - 1."""

    count: int

    def find(self, term: str) -> int | None:
        """The id of `term`, if stored."""
        ...

    def term(self, term_id: int) -> str:
        """The term with a stored id."""
        ...

    def all(self) -> list[str]:
        """Every stored term, by id."""
        ...


class StoredThenAdded(Sequence[str]):
    """The stored terms, then the ones added since."""

    def __init__(self, stored: StoredTerms, added: list[str]) -> None:
        self._stored = stored
        self._added = added

    @property
    def stored(self) -> StoredTerms:
        return self._stored

    @property
    def added(self) -> list[str]:
        return self._added

    def __len__(self) -> int:
        return self._stored.count + len(self._added)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < self._stored.count:
            return self._stored.term(index)
        return self._added[index - self._stored.count]


LOOKUPS_BEFORE_LOAD = 100_000
"""Terms a vocabulary opened from a snapshot looks up there, one by one, before it builds the
map of every term instead (`Vocabulary._add`)."""


class Vocabulary:
    """Term strings to dense integer ids; ids only grow, so stored arrays stay valid.

    Adding terms is serialised (files are turned into vectors on more than one thread); looking
    one up takes no lock. A vocabulary opened from a snapshot looks its terms up there (a few
    microseconds each), for queries and for the first files indexed after opening alike; only
    when many files are indexed (`LOOKUPS_BEFORE_LOAD` terms) is the map of every term built,
    which takes most of a second at 250,000 files: the first edit after opening a big index
    would wait for it.
    """

    __slots__ = ("_added", "_ids", "_lock", "_lookups", "_stored")

    def __init__(self, terms: Iterable[str] = (), stored: StoredTerms | None = None) -> None:
        # Built in one pass (repeats keep their first id, as `intern` would give them): interning
        # a stored vocabulary term by term took half a second.
        self._added: list[str] = list(dict.fromkeys(terms))
        self._ids: dict[str, int] = dict(zip(self._added, range(len(self._added)), strict=True))
        if stored is not None:
            offset = stored.count
            self._ids = {term: offset + n for term, n in self._ids.items()}
        self._stored = stored
        self._lock = threading.Lock()
        self._lookups = 0

    @property
    def terms(self) -> Sequence[str]:
        """Every term, by id."""
        stored = self._stored
        return self._added if stored is None else StoredThenAdded(stored, self._added)

    def all_terms(self) -> list[str]:
        """Every term, by id, as a new list."""
        stored = self._stored
        return list(self._added) if stored is None else [*stored.all(), *self._added]

    def frozen(self) -> Sequence[str]:
        """Every term, by id, as they are now: a vocabulary opened from a snapshot keeps its
        stored terms there (decoding 1.47 million of them held the interpreter 0.2 s)."""
        with self._lock:  # not between the two halves of `_load`
            stored, added = self._stored, list(self._added)
        return added if stored is None else StoredThenAdded(stored, added)

    def __len__(self) -> int:
        stored = self._stored
        return len(self._added) + (0 if stored is None else stored.count)

    def intern(self, term: str) -> int:
        """The id of `term`, adding it when new."""
        found = self._ids.get(term)
        if found is None:
            with self._lock:
                found = self._add(term)
        return found

    def _add(self, term: str) -> int:
        found = self._ids.get(term)
        if found is not None:
            return found
        stored = self._stored
        offset = 0
        if stored is not None:
            self._lookups += 1
            if self._lookups > LOOKUPS_BEFORE_LOAD:
                self._load()
                return self._add(term)
            found = stored.find(term)
            if found is not None:
                self._ids[term] = found
                return found
            offset = stored.count
        # The term goes in the list first: an id in the map always names a listed term.
        self._added.append(term)
        found = self._ids[term] = offset + len(self._added) - 1
        return found

    def _load(self) -> None:
        """Hold every stored term in memory (under the lock)."""
        stored = self._stored
        assert stored is not None
        terms = [*stored.all(), *self._added]
        ids = dict(zip(terms, range(len(terms)), strict=True))
        # In this order: a lookup that finds no store finds the full map.
        self._added, self._ids = terms, ids
        self._stored = None

    def get(self, term: str) -> int | None:
        """The id of `term`, or None when no document ever had it."""
        stored = self._stored  # read first: see `_load`
        found = self._ids.get(term)
        if found is None and stored is not None:
            found = stored.find(term)
            if found is not None:
                # Kept, so the next query finds it in the map (its id never changes).
                self._ids[term] = found
        return found

    def vector(self, weights: Mapping[str, float]) -> tuple[IntArray, FloatArray]:
        """A document as parallel arrays of term ids and weights, ids ascending."""
        n = len(weights)
        with self._lock:
            ids = np.fromiter(map(self._add, weights), dtype=np.int32, count=n)
        tfs = np.fromiter(weights.values(), dtype=np.float32, count=n)
        order = np.argsort(ids)
        return ids[order], tfs[order]
