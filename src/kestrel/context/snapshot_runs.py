"""Runs of records stored one after another in one snapshot, and their columns' offsets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kestrel.context.record import FileRecord
from kestrel.context.snapshot import Array, Snapshot


@dataclass(frozen=True, slots=True)
class Run:
    """Records `lo` to `hi` (excluded) of one snapshot, in the order they are stored."""

    source: Snapshot
    lo: int
    hi: int

    def at(self, name: str) -> Array:
        """The per-record offsets `name` of the run's records, one past the last included."""
        return self.source.array(name)[self.lo : self.hi + 1]

    def inner(self, name: str) -> Run:
        """The run of the items (chunks, definitions) that offsets `name` give its records."""
        at = self.at(name)
        return Run(self.source, int(at[0]), int(at[-1]))


def runs_of(records: Sequence[FileRecord]) -> list[Run]:
    """The records as runs of consecutive stored records; ValueError if one is not stored."""
    spans: list[list[Any]] = []
    for record in records:
        slot = record.snapshot_slot
        if slot is None or not isinstance(slot[0], Snapshot):
            raise ValueError(f"{record.path}: its body is not stored in a snapshot")
        source, index = slot
        last = spans[-1] if spans else None
        if last is not None and last[0] is source and last[2] == index:
            last[2] = index + 1
        else:
            spans.append([source, index, index + 1])
    return [Run(source, lo, hi) for source, lo, hi in spans]


def sizes_of(runs: Sequence[Run], at: str) -> Array:
    """How many items (terms, chunks, definitions) offsets `at` give each of the runs' records."""
    parts = [np.diff(run.at(at)) for run in runs]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
