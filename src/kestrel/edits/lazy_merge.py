"""Merging a lazy edit into a file, deterministically.

The edit's lines are split at its elision markers into stretches. The first and last line of
each stretch are anchors: unchanged lines that must be found in the file, in order. Each
stretch replaces the file from its first anchor to its last; the file between one stretch and
the next (what a marker stands for) is kept byte for byte. An edit with no marker above its
first line starts at the top of the file, and one with no marker below its last line runs to
the end of the file.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kestrel.edits.doc import BOM, Doc
from kestrel.edits.errors import Ambiguous, MalformedEdit
from kestrel.edits.indent import Reindent, restyler
from kestrel.edits.lazy_anchor import (
    MAX_PLACEMENTS,
    SHOWN,
    TIERS,
    Anchor,
    Placement,
    Solved,
    anchor_reindent,
    place_anchors,
)
from kestrel.edits.lazy_context import best_region, past_empty_markers


@dataclass(frozen=True, slots=True)
class Stretch:
    """Edit lines between markers (blank lines next to a marker dropped), 0-based `first`."""

    first: int
    lines: tuple[str, ...]
    after_marker: bool
    before_marker: bool


@dataclass(frozen=True, slots=True)
class Span:
    """The file lines `[start, stop)` a stretch replaces."""

    start: int
    stop: int


def stretches(lines: Sequence[str], markers: Sequence[bool]) -> list[Stretch]:
    """The stretches between marker lines; consecutive markers count as one."""
    out: list[Stretch] = []
    start = 0
    cuts = [n for n, is_marker in enumerate(markers) if is_marker]
    for stop in [*cuts, len(lines)]:
        body = [n for n in range(start, stop) if lines[n].strip()]
        if body:
            # At the file's own top or end (no marker there) blank lines are part of the edit.
            first = 0 if start == 0 else body[0]
            last = len(lines) - 1 if stop == len(lines) else body[-1]
            out.append(
                Stretch(
                    first=first,
                    lines=tuple(lines[first : last + 1]),
                    after_marker=start > 0,
                    before_marker=stop < len(lines),
                )
            )
        start = stop + 1
    return out


def merge(doc: Doc, lines: Sequence[str], markers: Sequence[bool], path: str) -> Doc:
    """`doc` with the lazy edit `lines` merged in (`markers[i]`: line i is an elision)."""
    if doc.bom and lines and lines[0].startswith(BOM):
        # The file's byte order mark copied with its first line: the file keeps its own.
        lines = [lines[0].removeprefix(BOM), *lines[1:]]
    parts = stretches(lines, markers)
    if not parts:
        raise MalformedEdit(
            f"the edit for {path} has only elision markers and blank lines; write the changed "
            "code between unchanged lines",
            path=path,
        )
    body = [n for n, line in enumerate(doc.lines) if line.strip()]
    if not body:
        if any(markers):
            raise MalformedEdit(
                f"{path} is empty, so nothing can be elided; write the whole content", path=path
            )
        return _emit(doc, parts, [Span(0, len(doc.lines))], None, exact=True)
    top, bottom = body[0], body[-1]
    anchors, owners = _anchors(parts)
    lo = top if not parts[0].after_marker else 0
    hi = bottom if not parts[-1].before_marker else len(doc.lines) - 1
    solved = place_anchors(doc.lines, anchors, lo, hi, path)
    # Pinned to the file's top (end), the edit replaces from its first (to its last) line,
    # blank lines included.
    first = 0 if not parts[0].after_marker else top
    last = len(doc.lines) - 1 if not parts[-1].before_marker else bottom
    try:
        return _only_result(doc, parts, anchors, owners, solved, (first, last), path)
    except Ambiguous:
        placement = _settle(doc.lines, parts, anchors, owners, solved, (first, last))
        if placement is None:
            raise
    return _land(doc, parts, owners, placement, solved.tier, (first, last), path)


def _only_result(
    doc: Doc,
    parts: Sequence[Stretch],
    anchors: Sequence[Anchor],
    owners: Sequence[tuple[int, int]],
    solved: Solved,
    ends: tuple[int, int],
    path: str,
) -> Doc:
    """The file every placement gives; `Ambiguous` when placements give different files."""
    if len(solved.placements) > MAX_PLACEMENTS:
        raise _ambiguous(anchors, solved, path)
    result: Doc | None = None
    for placement in solved.placements:
        landed = _land(doc, parts, owners, placement, solved.tier, ends, path)
        if result is not None and landed != result:
            raise _ambiguous(anchors, solved, path)
        result = landed
    assert result is not None
    return result


def _land(
    doc: Doc,
    parts: Sequence[Stretch],
    owners: Sequence[tuple[int, int]],
    placement: Placement,
    tier: str,
    ends: tuple[int, int],
    path: str,
) -> Doc:
    spans = _spans(parts, owners, placement, *ends)
    if not parts[0].after_marker:
        _check_top(doc.lines[spans[0].start : spans[0].stop], parts[0], path)
    if not parts[-1].before_marker:
        _check_bottom(doc.lines[spans[-1].start : spans[-1].stop], parts[-1], path)
    return _emit(doc, parts, spans, placement.reindent, exact=tier == "exact")


def _settle(
    file_lines: Sequence[str],
    parts: Sequence[Stretch],
    anchors: Sequence[Anchor],
    owners: Sequence[tuple[int, int]],
    solved: Solved,
    ends: tuple[int, int],
) -> Placement | None:
    """The placement the edit's context proves when its anchors alone fit several places
    (`kestrel.edits.lazy_context`), or `None` when no placement is proven over the others."""
    key = dict(TIERS)[solved.tier]
    picked = [-1] * len(anchors)
    for k, (part, (head, tail)) in enumerate(zip(parts, owners, strict=True)):
        starts = solved.candidates[head] if head >= 0 else (ends[0],)
        stops = solved.candidates[tail] if tail >= 0 and part.before_marker else (ends[1],)
        if head >= 0 and tail == head:
            stops = starts  # A one-line stretch: its line is both ends.
        choice = best_region(file_lines, part.lines, starts, stops, key, same=tail == head)
        if choice is None:
            # A marker at the edit's top (bottom) says some lines lie above (below) it.
            above = ends[0] if k == 0 and part.after_marker else None
            below = ends[1] if k == len(parts) - 1 and part.before_marker else None
            choice = past_empty_markers(
                file_lines,
                part.lines,
                (starts, stops),
                key,
                same=tail == head,
                bounds=(above, below),
            )
        if choice is None:
            return None
        if head >= 0:
            picked[head] = choice.start
        if tail >= 0:
            picked[tail] = choice.end
    for k in range(1, len(anchors)):
        if picked[k] < picked[k - 1] or (anchors[k].strict and picked[k] == picked[k - 1]):
            return None
    reindent = anchor_reindent(anchors, picked, file_lines, solved.tier)
    return None if reindent is None else Placement(tuple(picked), reindent)


def _anchors(parts: Sequence[Stretch]) -> tuple[list[Anchor], list[tuple[int, int]]]:
    """The anchors in order, and for each stretch the indexes of its head and tail anchors
    (-1 where the stretch is pinned to the top or bottom of the file)."""
    anchors: list[Anchor] = []
    owners: list[tuple[int, int]] = []
    for k, part in enumerate(parts):
        head = tail = -1
        if part.after_marker:
            head = len(anchors)
            anchors.append(Anchor(part.lines[0], part.first, "the line after a marker"))
        last = part.first + len(part.lines) - 1
        if part.before_marker and (len(part.lines) > 1 or head == -1):
            role = "the line before a marker"
            # Pinned to the top, the stretch's first line may be its tail anchor: at or below.
            strict = not (k == 0 and not part.after_marker)
            tail = len(anchors)
            anchors.append(Anchor(part.lines[-1], last, role, strict=strict))
        elif part.before_marker:
            tail = head
        owners.append((head, tail))
    return anchors, owners


def _spans(
    parts: Sequence[Stretch],
    owners: Sequence[tuple[int, int]],
    placement: Placement,
    top: int,
    bottom: int,
) -> list[Span]:
    spans = []
    for (head, tail), part in zip(owners, parts, strict=True):
        start = placement.lines[head] if head >= 0 else top
        stop = placement.lines[tail] + 1 if tail >= 0 else bottom + 1
        if not part.before_marker:
            stop = bottom + 1
        spans.append(Span(start, stop))
    return spans


def _emit(
    doc: Doc,
    parts: Sequence[Stretch],
    spans: Sequence[Span],
    reindent: Reindent | None,
    *,
    exact: bool,
) -> Doc:
    lines: list[str] = []
    eols: list[str] = []
    cursor = 0
    restyle = restyler(doc.lines, [line for part in parts for line in part.lines])
    for part, span in zip(parts, spans, strict=True):
        lines.extend(doc.lines[cursor : span.start])
        eols.extend(doc.eols[cursor : span.start])
        new = part.lines if reindent is None else [reindent.apply(line) for line in part.lines]
        if restyle is not None:
            new = [restyle(line) for line in new]
        _merge_span(doc, span, new, lines, eols, exact=exact)
        cursor = span.stop
    lines.extend(doc.lines[cursor:])
    eols.extend(doc.eols[cursor:])
    return _finish(doc, lines, eols)


def _merge_span(
    doc: Doc, span: Span, new: Sequence[str], lines: list[str], eols: list[str], *, exact: bool
) -> None:
    """`new` in place of the span; unchanged lines keep their line endings and, when the
    anchors matched only with whitespace tolerated, the file's trailing whitespace."""
    old = doc.lines[span.start : span.stop]
    if list(old) == list(new):
        lines.extend(old)
        eols.extend(doc.eols[span.start : span.stop])
        return
    if exact and not doc.mixed:
        # Every line ends the same way and the edit's text is taken as written: no pairing.
        lines.extend(new)
        eols.extend([doc.eol] * len(new))
        return
    a = list(old) if exact else [line.rstrip() for line in old]
    b = list(new) if exact else [line.rstrip() for line in new]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for code, i1, i2, j1, j2 in matcher.get_opcodes():
        if code == "equal":
            lines.extend(old[i1:i2])
            eols.extend(doc.eols[span.start + i1 : span.start + i2])
        else:
            lines.extend(new[j1:j2])
            eols.extend([doc.eol] * (j2 - j1))


def _finish(doc: Doc, lines: list[str], eols: list[str]) -> Doc:
    """Every line ends with a newline but the last, which keeps the file's final-newline state."""
    eols = [eol or doc.eol for eol in eols]
    if eols and not doc.final_newline:
        eols[-1] = ""
    return Doc(lines=tuple(lines), eols=tuple(eols), bom=doc.bom, eol=doc.eol, mixed=doc.mixed)


def _check_top(file_lines: Sequence[str], part: Stretch, path: str) -> None:
    """Without a marker above it, the edit must start at the top of the file."""
    problem = _misaligned(file_lines, part.lines)
    if problem is None:
        return
    raise MalformedEdit(
        f"the edit for {path} has no elision marker above its first line, so it must start at "
        f"the top of the file, but {problem}. To keep the lines above the change, put a marker "
        "such as `# ... existing code ...` (in the file's comment syntax) first; to change the "
        "top of the file, start from its first line",
        path=path,
    )


def _check_bottom(file_lines: Sequence[str], part: Stretch, path: str) -> None:
    """Without a marker below it, the edit must run to the end of the file."""
    problem = _misaligned(file_lines[::-1], part.lines[::-1], end=True)
    if problem is None:
        return
    raise MalformedEdit(
        f"the edit for {path} has no elision marker below its last line, so it must run to "
        f"the end of the file, but {problem}. To keep the lines below the change, put a marker "
        "such as `# ... existing code ...` last; to change the end of the file, write it out "
        "to its last line",
        path=path,
    )


def _misaligned(file_lines: Sequence[str], edit: Sequence[str], *, end: bool = False) -> str | None:
    """Why `edit` does not line up with the start of `file_lines` (`None` when it does).

    `file_lines` are the lines the edit replaces. It lines up when it starts with their first
    non-blank line, or when the file lines above the first line the edit shows of them are
    each shown elsewhere in the edit (moved) or outnumbered by the new lines above it (written
    over): lines are never dropped from the top without being shown, which is what a forgotten
    marker looks like.
    """
    f = [line.strip() for line in file_lines if line.strip()]
    e = [line.strip() for line in edit if line.strip()]
    if not f or not e or e[0] == f[0]:
        return None
    known = set(f)
    i = next((n for n, line in enumerate(e) if line in known), None)
    if i is None:
        return None
    j = f.index(e[i])
    # A line above counts as shown when the edit has more copies of it than the file has below.
    spare = Counter(e)
    spare.subtract(f[j:])
    dropped = []
    for line in f[:j]:
        if spare[line] > 0:
            spare[line] -= 1
        else:
            dropped.append(line)
    if len(dropped) <= i:
        return None
    first = "last" if end else "first"
    which = "from the end" if end else "from the top"
    return (
        f"its {first} line the file has (`{e[i]}`) is non-blank line {j + 1} {which}, and "
        f"it does not show {len(dropped)} of the lines before that (the first: `{dropped[0]}`)"
    )


def _ambiguous(anchors: Sequence[Anchor], solved: Solved, path: str) -> Ambiguous:
    k = next(n for n, found in enumerate(solved.candidates) if len(found) > 1)
    anchor = anchors[k]
    found = solved.candidates[k]
    shown = ", ".join(str(n + 1) for n in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    how = "" if solved.tier == "exact" else f" (with {solved.tier} ignored)"
    return Ambiguous(
        f"{anchor.role} (line {anchor.edit_line + 1} of the edit: `{anchor.text.strip()}`) "
        f"matches {len(found)} places in {path}{how} that fit between the other anchors: "
        f"lines {shown}{more}. Next to each marker, use an unchanged line that occurs once in "
        "that part of the file (or show more of the code around it)",
        path=path,
        lines=tuple(n + 1 for n in found),
    )
