"""Finding where a needle of lines sits in a file, from strict to tolerant, every candidate counted.

Each tier is tried in order; the first tier with any candidate decides. The caller refuses when
that tier has more than one (unless the format gives a tie-breaker), so a looser tier never
overrides a stricter one and nothing is ever "the first match".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from kestrel.edits.indent import IDENTITY, Reindent, find_reindent

TIERS = (
    "exact",
    "trailing whitespace",
    "indentation",
    "unicode look-alikes",
    "blank lines",
    "elision",
)

LOOKALIKES = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2007\u2009\u202f\u3000", " "),
        "\u2026": "...",
    }
)
"""Characters models emit in place of the ASCII the file has."""

ELISION_CHAINS = 10
"""Most ways of placing elided gaps that are worked out before a needle counts as ambiguous."""

_MARKER = re.compile(
    r"(?:(?:#|//|/\*|<!--|--|;)\s*)?(?:\.\.\.|\u2026)"
    r"(?:\s*[A-Za-z][\w '/-]*?\s*(?:\.\.\.|\u2026)?)?\s*(?:\*/|-->)?"
)


def is_marker(line: str) -> bool:
    """True for a line that stands for omitted code: `...`, `# ... existing code ...`, `// ...`."""
    return _MARKER.fullmatch(line.strip()) is not None


@dataclass(frozen=True, slots=True)
class Match:
    """One candidate: the file lines `[start, end)` and where each needle line landed.

    `amap[i]` is the file line of needle line `i`, or `None` when that line has no counterpart
    (a blank line the file lacks, or an elision marker).
    """

    start: int
    end: int
    amap: tuple[int | None, ...]
    tier: str
    reindent: Reindent = IDENTITY


@dataclass(frozen=True, slots=True)
class Found:
    """All candidates at the strictest tier that had any."""

    tier: str
    matches: tuple[Match, ...]


def fold(text: str) -> str:
    """`text` with Unicode look-alikes replaced by their ASCII forms."""
    return text.translate(LOOKALIKES)


class _View:
    """The file's lines under each tier's normalisation, computed on first use."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines

    @cached_property
    def exact(self) -> str:
        return "\n".join(self.lines)

    @cached_property
    def rstripped(self) -> str:
        return "\n".join([line.rstrip() for line in self.lines])

    @cached_property
    def stripped(self) -> str:
        return "\n".join([line.strip() for line in self.lines])

    @cached_property
    def folded(self) -> str:
        return fold(self.stripped)

    @cached_property
    def nonblank(self) -> tuple[list[int], str]:
        index = [n for n, line in enumerate(self.lines) if line.strip()]
        return index, "\n".join([fold(self.lines[n].strip()) for n in index])


def _hits(hay: str, pat: str) -> list[int]:
    """0-based line numbers where `pat` occurs as whole lines in `hay` (overlaps included)."""
    found: list[int] = []
    size = len(pat)
    line = 0
    counted_to = 0
    at = hay.find(pat)
    while at != -1:
        end = at + size
        if (at == 0 or hay[at - 1] == "\n") and (end == len(hay) or hay[end] == "\n"):
            line += hay.count("\n", counted_to, at)
            counted_to = at
            found.append(line)
        at = hay.find(pat, at + 1)
    return found


def _contiguous(
    view: _View, needle: Sequence[str], hay: str, key: Callable[[str], str], tier: str
) -> list[Match]:
    pat = "\n".join([key(line) for line in needle])
    n = len(needle)
    out = []
    for start in _hits(hay, pat):
        amap = tuple(range(start, start + n))
        if tier in ("exact", "trailing whitespace"):
            out.append(Match(start, start + n, amap, tier))
            continue
        reindent = _reindent_for(view, needle, amap)
        if reindent is not None:
            out.append(Match(start, start + n, amap, tier, reindent))
    return out


def _reindent_for(
    view: _View, needle: Sequence[str], amap: Sequence[int | None]
) -> Reindent | None:
    pairs = [
        (line, view.lines[at])
        for line, at in zip(needle, amap, strict=True)
        if at is not None and line.strip()
    ]
    return find_reindent(pairs)


def _blank_tolerant(view: _View, needle: Sequence[str]) -> list[Match]:
    index, hay = view.nonblank
    picked = [i for i, line in enumerate(needle) if line.strip()]
    pat = "\n".join([fold(needle[i].strip()) for i in picked])
    out = []
    for first in _hits(hay, pat):
        amap: list[int | None] = [None] * len(needle)
        for k, i in enumerate(picked):
            amap[i] = index[first + k]
        _align_blanks(view.lines, needle, amap)
        reindent = _reindent_for(view, needle, amap)
        if reindent is None:
            continue
        placed = [a for a in amap if a is not None]
        out.append(Match(min(placed), max(placed) + 1, tuple(amap), "blank lines", reindent))
    return out


def _align_blanks(lines: Sequence[str], needle: Sequence[str], amap: list[int | None]) -> None:
    """Pair the needle's blank lines with the file's blank lines where the file has them."""
    anchors = [i for i, a in enumerate(amap) if a is not None]
    first, last = anchors[0], anchors[-1]
    for i in range(first - 1, -1, -1):  # leading blanks, walking up from the first anchor
        above = amap[i + 1]
        at = None if above is None else above - 1
        if at is None or at < 0 or lines[at].strip():
            break
        amap[i] = at
    for i in range(last + 1, len(needle)):  # trailing blanks, walking down
        below = amap[i - 1]
        at = None if below is None else below + 1
        if at is None or at >= len(lines) or lines[at].strip():
            break
        amap[i] = at
    for a, b in itertools.pairwise(anchors):
        above, below = amap[a], amap[b]
        if above is None or below is None:
            continue
        for i, at in zip(range(a + 1, b), range(above + 1, below), strict=False):
            amap[i] = at


def end_aligned(m: Match, needle: Sequence[str]) -> Match:
    """`m` with each run of the needle's blank lines between two anchored lines paired with
    the last blank lines of the file's run there, not the first (the other way to read it)."""
    amap = list(m.amap)
    anchors = [i for i, line in enumerate(needle) if line.strip() and amap[i] is not None]
    for a, b in itertools.pairwise(anchors):
        above, below = amap[a], amap[b]
        if above is None or below is None:
            continue
        inner = list(range(a + 1, b))
        for i in inner:
            amap[i] = None
        for i, at in zip(reversed(inner), range(below - 1, above, -1), strict=False):
            amap[i] = at
    return Match(m.start, m.end, tuple(amap), m.tier, m.reindent)


def _tier_matches(view: _View, needle: Sequence[str], tier: str) -> list[Match]:
    if tier == "exact":
        return _contiguous(view, needle, view.exact, lambda s: s, tier)
    if not any(line.strip() for line in needle):
        return []
    if tier == "trailing whitespace":
        return _contiguous(view, needle, view.rstripped, str.rstrip, tier)
    if tier == "indentation":
        return _contiguous(view, needle, view.stripped, str.strip, tier)
    if tier == "unicode look-alikes":
        return _contiguous(view, needle, view.folded, lambda s: fold(s.strip()), tier)
    return _blank_tolerant(view, needle)


def find_matches(lines: Sequence[str], needle: Sequence[str]) -> Found | None:
    """Every candidate at the strictest tier that has one, with any candidate of a looser
    tier that needs different tolerances (neither explains the needle better), or `None` if
    no tier matches."""
    view = _View(lines)
    for tier in TIERS[:-1]:
        matches = _tier_matches(view, needle, tier)
        if not matches:
            continue
        if tier != "exact" and tier != TIERS[-2]:
            matches = _least_tolerant(
                [*matches, *_tier_matches(view, needle, TIERS[-2])], view, needle
            )
        return Found(tier, tuple(matches))
    return _elided(view, needle)


def _least_tolerant(matches: Sequence[Match], view: _View, needle: Sequence[str]) -> list[Match]:
    """The candidates no other candidate explains with fewer tolerances (one per place).

    Tiers are tried in order, but they are different kinds of tolerance, not one scale: a
    needle can fit one place with its indentation shifted and another with a blank line
    missing. Neither is the better explanation, so both are kept and the caller refuses.
    Trailing whitespace weighs least: it only decides between otherwise equal candidates.
    """
    placed: dict[tuple[int, int], tuple[Match, frozenset[str]]] = {}
    for m in matches:
        if (m.start, m.end) not in placed:
            placed[(m.start, m.end)] = (m, _tolerances(view.lines, needle, m))
    kept = []
    for m, needs in placed.values():
        if not any(_fewer(other, needs) for _, other in placed.values()):
            kept.append(m)
    return kept


def _fewer(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether tolerances `a` explain a needle strictly better than `b`."""
    major_a, major_b = a - {"trailing"}, b - {"trailing"}
    if major_a != major_b:
        return major_a < major_b
    return "trailing" in b and "trailing" not in a


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _tolerances(lines: Sequence[str], needle: Sequence[str], m: Match) -> frozenset[str]:
    """What the candidate needs: trailing whitespace, indentation, look-alikes, blank lines."""
    needs: set[str] = set()
    paired = {at for at in m.amap if at is not None}
    if len(paired) < len(needle) or len(paired) < m.end - m.start:
        needs.add("blank")
    for line, at in zip(needle, m.amap, strict=True):
        if at is None or line == lines[at]:
            continue
        other = lines[at]
        if _lead(line) != _lead(other):
            needs.add("indentation")
        if line[len(line.rstrip()) :] != other[len(other.rstrip()) :]:
            needs.add("trailing")
        if line.strip() != other.strip():
            needs.add("unicode")
    return frozenset(needs)


def _elided(view: _View, needle: Sequence[str]) -> Found | None:
    """Markers split the needle into segments that must each match, in order, with gaps between."""
    if not any(is_marker(line) for line in needle):
        return None
    segments: list[tuple[int, Sequence[str]]] = []
    start = 0
    for stop in [*(i for i, line in enumerate(needle) if is_marker(line)), len(needle)]:
        part = needle[start:stop]
        if any(line.strip() for line in part):
            segments.append((start, part))
        start = stop + 1
    if not segments:
        return None
    for tier in TIERS[:-1]:
        per = [_tier_matches(view, part, tier) for _, part in segments]
        if not all(per):
            continue
        chains = _chains(per, limit=ELISION_CHAINS)
        if chains:
            joined = tuple(_join(len(needle), segments, chain) for chain in chains)
            return Found("elision", joined)
    return None


def _chains(per: Sequence[Sequence[Match]], limit: int) -> list[tuple[Match, ...]]:
    """Up to `limit` ways to pick one candidate per segment, each starting after the last."""
    feasible: list[list[bool]] = [[True] * len(per[-1])]
    for k in range(len(per) - 2, -1, -1):
        later = [m.start for m, ok in zip(per[k + 1], feasible[0], strict=True) if ok]
        latest = max(later, default=-1)
        feasible.insert(0, [m.end <= latest for m in per[k]])
    out: list[tuple[Match, ...]] = []

    def walk(k: int, after: int, picked: tuple[Match, ...]) -> None:
        if len(out) >= limit:
            return
        if k == len(per):
            out.append(picked)
            return
        for m, ok in zip(per[k], feasible[k], strict=True):
            if ok and m.start >= after:
                walk(k + 1, m.end, (*picked, m))

    walk(0, 0, ())
    return out


def _join(
    size: int, segments: Sequence[tuple[int, Sequence[str]]], chain: Sequence[Match]
) -> Match:
    amap: list[int | None] = [None] * size
    for (offset, _), m in zip(segments, chain, strict=True):
        for i, at in enumerate(m.amap):
            amap[offset + i] = at
    shifts = [m.reindent for m in chain if not m.reindent.identity]
    reindent = shifts[0] if shifts else IDENTITY
    return Match(chain[0].start, chain[-1].end, tuple(amap), "elision", reindent)
