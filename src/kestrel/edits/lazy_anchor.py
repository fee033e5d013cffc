"""Placing a lazy edit's anchors: the unchanged lines next to each elision marker.

Every anchor is one edit line that must be a line of the file. Anchors must land in the order
the edit gives them; each must have exactly one place that fits between its neighbours (or
every fitting placement must give the same file). Matching is tried exact, then ignoring
trailing whitespace, then ignoring indentation (with one consistent re-indentation); the first
tier where every anchor fits decides, so a looser tier never overrides a stricter one.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from kestrel.edits.errors import MalformedEdit, NoMatch
from kestrel.edits.indent import IDENTITY, Reindent, find_reindent

TIERS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("exact", lambda s: s),
    ("trailing whitespace", str.rstrip),
    ("indentation", str.strip),
)
MAX_PLACEMENTS = 8
"""Most placements compared before anchors that fit several places count as ambiguous."""
SHOWN = 6
CLOSE_POOL = 8
"""Most file lines compared when looking for the line closest to an anchor that is missing."""
_WORD = re.compile(r"[A-Za-z_]\w{2,}")


@dataclass(frozen=True, slots=True)
class Anchor:
    """An edit line that must be a file line: `edit_line` is 0-based in the edit text."""

    text: str
    edit_line: int
    role: str
    """How it is described to the model: 'the line after the marker at line 7'."""
    strict: bool = True
    """Whether it must lie below the previous anchor (not merely at or below it)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """File line of each anchor, and how the edit's indentation maps onto the file's."""

    lines: tuple[int, ...]
    reindent: Reindent = IDENTITY


@dataclass(frozen=True, slots=True)
class Solved:
    """Every placement at the strictest tier that had one (more than one: ambiguous)."""

    tier: str
    placements: tuple[Placement, ...]
    candidates: tuple[tuple[int, ...], ...]
    """For each anchor, the file lines it can take in some placement."""


def place_anchors(
    file_lines: Sequence[str], anchors: Sequence[Anchor], lo: int, hi: int, path: str
) -> Solved:
    """All placements with `lo <= first` and `last <= hi`, or a refusal saying why none fits."""
    failure: Callable[[], Exception] | None = None
    for tier, key in TIERS:
        where = _positions(file_lines, anchors, key)
        missing = next((k for k, found in enumerate(where) if not found), None)
        if missing is not None:
            # Built only if no tier fits: finding the closest line reads the whole file.
            failure = partial(_not_found, file_lines, anchors[missing], path)
            continue
        pruned = _prune(where, anchors, lo, hi)
        if isinstance(pruned, int):
            failure = partial(_out_of_order, anchors, where, pruned, lo, hi, path)
            continue
        placements = _placements(pruned, anchors, file_lines, tier)
        if placements:
            return Solved(tier, tuple(placements), tuple(tuple(c) for c in pruned))
        failure = partial(_inconsistent_indent, path)
    assert failure is not None
    raise failure()


def _inconsistent_indent(path: str) -> MalformedEdit:
    return MalformedEdit(
        f"the anchors of the edit for {path} match the file only with different indentation, "
        "and not by one consistent shift; copy the unchanged lines with the file's indentation",
        path=path,
    )


def _positions(
    file_lines: Sequence[str], anchors: Sequence[Anchor], key: Callable[[str], str]
) -> list[list[int]]:
    wanted: dict[str, list[int]] = {key(a.text): [] for a in anchors}
    for n, line in enumerate(file_lines):
        found = wanted.get(key(line))
        if found is not None:
            found.append(n)
    return [wanted[key(a.text)] for a in anchors]


def _prune(
    where: Sequence[list[int]], anchors: Sequence[Anchor], lo: int, hi: int
) -> list[list[int]] | int:
    """Keep each anchor's lines that lie in some ordered placement; else the failing index."""
    kept: list[list[int]] = []
    low = lo
    for k, found in enumerate(where):
        strict = k > 0 and anchors[k].strict
        fits = [n for n in found if (n > low if strict else n >= low) and n <= hi]
        if not fits:
            return k
        kept.append(fits)
        low = fits[0]
    high = hi
    for k in range(len(kept) - 1, -1, -1):
        strict = k + 1 < len(kept) and anchors[k + 1].strict
        kept[k] = [n for n in kept[k] if (n < high if strict else n <= high)]
        high = kept[k][-1]
    return kept


def _placements(
    pruned: Sequence[list[int]], anchors: Sequence[Anchor], file_lines: Sequence[str], tier: str
) -> list[Placement]:
    """Up to `MAX_PLACEMENTS + 1` ordered placements (each with its re-indentation)."""
    out: list[Placement] = []

    def walk(k: int, after: int, picked: tuple[int, ...]) -> None:
        if len(out) > MAX_PLACEMENTS:
            return
        if k == len(pruned):
            reindent = anchor_reindent(anchors, picked, file_lines, tier)
            if reindent is not None:
                out.append(Placement(picked, reindent))
            return
        strict = k > 0 and anchors[k].strict
        for n in pruned[k]:
            if n > after or (n == after and not strict):
                walk(k + 1, n, (*picked, n))

    walk(0, -1, ())
    return out


def anchor_reindent(
    anchors: Sequence[Anchor], lines: Sequence[int], file_lines: Sequence[str], tier: str
) -> Reindent | None:
    """How the edit's indentation maps onto the file's with anchors at `lines` (`None`: no
    one consistent shift)."""
    if tier != "indentation":
        return IDENTITY
    pairs = [(a.text, file_lines[n]) for a, n in zip(anchors, lines, strict=True)]
    return find_reindent(pairs)


def _not_found(file_lines: Sequence[str], anchor: Anchor, path: str) -> NoMatch:
    keys = [line.strip() for line in file_lines]
    words = set(_WORD.findall(anchor.text))
    # Only the lines sharing the most words are compared: comparing all is slow on big files.
    shared = [(len(words.intersection(_WORD.findall(key))), key) for key in keys]
    near = [key for count, key in heapq.nlargest(CLOSE_POOL, shared) if count]
    close = difflib.get_close_matches(anchor.text.strip(), near, n=1, cutoff=0.6)
    head = (
        f"{anchor.role} (line {anchor.edit_line + 1} of the edit: `{anchor.text.strip()}`) "
        f"is not a line of {path}, not even with whitespace ignored"
    )
    rule = (
        "The lines right before and after each elision marker (and the first and last lines "
        "of the edit) must be unchanged lines copied from the file, so that the elided code "
        "can be found; put an unchanged line there, or write out more of the code."
    )
    if not close:
        return NoMatch(f"{head}. {rule}", path=path)
    at = keys.index(close[0])
    return NoMatch(
        f"{head}. The closest line in the file is line {at + 1}: `{close[0]}`. {rule}",
        path=path,
        closest_line=at + 1,
        closest=(file_lines[at],),
    )


def _out_of_order(
    anchors: Sequence[Anchor],
    where: Sequence[list[int]],
    k: int,
    lo: int,
    hi: int,
    path: str,
) -> MalformedEdit:
    anchor = anchors[k]
    at = ", ".join(str(n + 1) for n in where[k][:SHOWN])
    this = f"{anchor.role} (line {anchor.edit_line + 1} of the edit: `{anchor.text.strip()}`)"
    if k == 0:
        bound = f"between lines {lo + 1} and {hi + 1}"
        return MalformedEdit(
            f"{this} is at line {at} of {path}, not {bound} where the edit places it; keep the "
            "stretches between markers in the file's order",
            path=path,
        )
    prev = anchors[k - 1]
    before = ", ".join(str(n + 1) for n in where[k - 1][:SHOWN])
    return MalformedEdit(
        f"the anchors of the edit are out of order for {path}: {this} is at line {at} of the "
        f"file, which is not below {prev.role} (line {prev.edit_line + 1} of the edit: "
        f"`{prev.text.strip()}`, at line {before} of the file). Keep the stretches between "
        "markers in the file's order, one elision marker per gap",
        path=path,
    )
