"""The documents of a restored BM25 index, read from the snapshot's arrays when needed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kestrel.context.lexical import Bm25Export, FloatArray, IntArray
from kestrel.context.snapshot import Snapshot

CHUNK_SEP = "\0"
"""Joins a path and a definition's position into a chunk key."""


def exported(snapshot: Snapshot, prefix: str) -> Bm25Export:
    """The BM25 postings stored under `prefix` ("f": files, "c": chunks)."""
    a = snapshot.array
    return Bm25Export(
        terms=a(f"{prefix}_terms"),
        offsets=a(f"{prefix}_offsets"),
        slots=a(f"{prefix}_slots"),
        tfs=a(f"{prefix}_tfs"),
        length=a(f"{prefix}_length"),
        df=a(f"{prefix}_df"),
        total_length=float(snapshot.totals[prefix]),
    )


class StoredFiles:
    """Ranked files: slot i is the snapshot's record i, keyed by its path."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.count = snapshot.ranked
        self.paths = snapshot.paths
        self._snapshot = snapshot
        self._at = snapshot.array("terms_at")
        self._ids = snapshot.array("term_ids")
        self._tfs = snapshot.array("term_tfs")

    def key(self, slot: int) -> str:
        """The path in `slot`."""
        return self.paths[slot]

    def keys(self, slots: Sequence[int]) -> list[str]:
        """The paths in these slots."""
        paths = self.paths
        return [paths[slot] for slot in slots]

    def find(self, key: str) -> int | None:
        """The slot of a path."""
        slot = self._snapshot.slot_of.get(key)
        return slot if slot is not None and slot < self.count else None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.find(key) is not None

    def doc(self, slot: int) -> tuple[IntArray, FloatArray]:
        """The file's term vector."""
        lo, hi = int(self._at[slot]), int(self._at[slot + 1])
        return self._ids[lo:hi], self._tfs[lo:hi]


class StoredChunks:
    """Chunks of the ranked files, in file order: a file's chunks have consecutive slots."""

    def __init__(self, snapshot: Snapshot, files: StoredFiles) -> None:
        self._files = files
        # Left as the mapped array: a chunk's file is found by bisection when a key is asked
        # for (a query asks for a few), instead of a table of every chunk built on opening.
        self._starts = snapshot.array("chunks_at")[: files.count + 1]
        self.count = int(self._starts[-1]) if len(self._starts) else 0
        self._at = snapshot.array("chunk_terms_at")
        self._ids = snapshot.array("chunk_ids")
        self._tfs = snapshot.array("chunk_tfs")

    def key(self, slot: int) -> str:
        """`path` + CHUNK_SEP + the chunk's position in its file."""
        owner = int(np.searchsorted(self._starts, slot, side="right")) - 1
        return self._files.paths[owner] + CHUNK_SEP + str(slot - int(self._starts[owner]))

    def keys(self, slots: Sequence[int]) -> list[str]:
        """The keys of these chunks, their files found in one pass."""
        at = np.asarray(slots, dtype=np.int64)
        owners = np.searchsorted(self._starts, at, side="right") - 1
        index = (at - self._starts[owners]).tolist()
        paths = self._files.paths
        return [
            paths[owner] + CHUNK_SEP + str(n)
            for owner, n in zip(owners.tolist(), index, strict=True)
        ]

    def find(self, key: str) -> int | None:
        """The slot of a chunk key."""
        path, _, index = key.partition(CHUNK_SEP)
        owner = self._files.find(path)
        if owner is None or not index.isdigit():
            return None
        slot = int(self._starts[owner]) + int(index)
        return slot if slot < int(self._starts[owner + 1]) else None

    def doc(self, slot: int) -> tuple[IntArray, FloatArray]:
        """The chunk's term vector."""
        lo, hi = int(self._at[slot]), int(self._at[slot + 1])
        return self._ids[lo:hi], self._tfs[lo:hi]
