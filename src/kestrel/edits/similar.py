"""The last resort before "not found": old text whose unchanged lines are only similar.

A model often copies context lines slightly wrong (a renamed variable, a comment it
paraphrased) while the lines it changes are right. Such a hunk is placed only when:

- every line the edit removes or rewrites is a line of the file at that place (whitespace
  aside), so nothing is changed that the model did not see;
- the window of the file is at least `SIMILAR` alike to the old text as a whole; and
- it is alike by a margin of `MARGIN` more than any other window: never "the best above a
  threshold" alone.

The context lines keep the file's own text: the similarity only places the edit.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from kestrel.edits.indent import IDENTITY, find_reindent
from kestrel.edits.match import Match, fold
from kestrel.edits.model import Tag

SIMILAR = 0.9
MARGIN = 0.05
MAX_WINDOWS = 200
"""Most windows compared; more (a changed line that is everywhere) is not settled here."""


def similar_match(
    lines: Sequence[str], needle: Sequence[str], ops: Sequence[tuple[Tag, str]]
) -> Match | None:
    """The one window the needle fits by similarity with a margin, or `None`."""
    changed = _changed_indexes(ops)
    if not changed or len(needle) < 3 or len(needle) > len(lines):
        return None
    keys = [fold(line.strip()) for line in lines]
    wanted = [fold(line.strip()) for line in needle]
    first = changed[0]
    starts = [n - first for n, key in enumerate(keys) if key == wanted[first]]
    starts = [s for s in starts if 0 <= s <= len(lines) - len(needle)]
    if not starts or len(starts) > MAX_WINDOWS:
        return None
    scored: list[tuple[float, int]] = []
    for start in starts:
        if any(keys[start + i] != wanted[i] for i in changed):
            continue
        window = "\n".join(keys[start : start + len(needle)])
        ratio = difflib.SequenceMatcher(None, window, "\n".join(wanted), autojunk=False).ratio()
        scored.append((ratio, start))
    scored.sort(reverse=True)
    if not scored or scored[0][0] < SIMILAR:
        return None
    if len(scored) > 1 and scored[0][0] - scored[1][0] < MARGIN:
        return None
    start = scored[0][1]
    amap = tuple(range(start, start + len(needle)))
    pairs = [(a, lines[b]) for a, b in zip(needle, amap, strict=True) if a.strip()]
    reindent = find_reindent([(a, b) for a, b in pairs if a.strip() == b.strip()]) or IDENTITY
    return Match(start, start + len(needle), amap, "similar lines", reindent)


def _changed_indexes(ops: Sequence[tuple[Tag, str]]) -> list[int]:
    """Indexes, among the old lines, of the lines the edit removes or rewrites."""
    out: list[int] = []
    index = 0
    for tag, _ in ops:
        if tag == "+":
            continue
        if tag == "-":
            out.append(index)
        index += 1
    return out
