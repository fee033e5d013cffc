"""Landing a hunk: choose the single candidate, then write it in the file's own conventions."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NoReturn

from kestrel.edits.doc import Doc
from kestrel.edits.errors import Ambiguous, MalformedEdit
from kestrel.edits.indent import restyler
from kestrel.edits.match import (
    ELISION_CHAINS,
    LOOKALIKES,
    Found,
    Match,
    end_aligned,
    find_matches,
    fold,
    is_marker,
)
from kestrel.edits.model import Hunk, Tag
from kestrel.edits.numbered import strip_numbers
from kestrel.edits.report import ambiguous, no_match
from kestrel.edits.similar import similar_match

WHAT = "The text to replace"


def apply_hunk(
    doc: Doc, hunk: Hunk, path: str, *, hint_shift: int = 0, after: int | None = None
) -> tuple[Doc, int, int]:
    """`doc` with `hunk` applied, plus where it landed (0-based start, lines removed).

    `after`, for formats whose hunks are found in order (V4A), is where the previous hunk of
    the file ended: of several places, the only one at or below it is taken."""
    if doc.bom and hunk.old and hunk.old[0].startswith("\ufeff"):
        # The model copied the file's byte order mark; the lines hold the text without it.
        new = (hunk.new[0].removeprefix("\ufeff"), *hunk.new[1:]) if hunk.new else ()
        hunk = _without_bom(hunk, new)
    if not hunk.old:
        at = _insertion_point(doc, hunk, path, hint_shift)
        return _splice(doc, at, at, list(hunk.new), [doc.eol] * len(hunk.new)), at, 0
    found = find_matches(doc.lines, hunk.old)
    if found is None:
        landed = _numbered(doc, hunk, path) or _similar(doc, hunk, path)
        return landed or _raise(no_match(path, doc.lines, hunk.old, WHAT))
    try:
        match = choose(found, hunk, doc, path, hint_shift, after=after)
    except Ambiguous:
        # Elided gaps can be placed several ways that all produce the same file; that is fine.
        if found.tier != "elision" or len(found.matches) >= ELISION_CHAINS:
            raise
        results = {_land(doc, hunk, m, path) for m in found.matches}
        if len(results) > 1:
            raise
        match = found.matches[0]
    return _land(doc, hunk, match, path), match.start, match.end - match.start


def _without_bom(hunk: Hunk, new: tuple[str, ...]) -> Hunk:
    old = (hunk.old[0].removeprefix("\ufeff"), *hunk.old[1:])
    ops = hunk.ops
    if ops is not None and ops:
        ops = ((ops[0][0], ops[0][1].removeprefix("\ufeff")), *ops[1:])
    return replace(hunk, old=old, new=new, ops=ops)


def _raise(error: Exception) -> NoReturn:
    raise error


def _numbered(doc: Doc, hunk: Hunk, path: str) -> tuple[Doc, int, int] | None:
    """The hunk landed without read line numbers copied into it, where the numbers say."""
    if hunk.ops is not None:
        return None
    bare = strip_numbers(hunk.old, hunk.new)
    if bare is None:
        return None
    found = find_matches(doc.lines, bare.old)
    at = [m for m in found.matches if m.start == bare.start] if found else []
    if len(at) != 1:
        return None
    plain = Hunk(old=bare.old, new=bare.new)
    return _land(doc, plain, at[0], path), at[0].start, at[0].end - at[0].start


def _similar(doc: Doc, hunk: Hunk, path: str) -> tuple[Doc, int, int] | None:
    """The hunk placed by similar context lines, its changed lines exact (`edits.similar`)."""
    ops = diff_ops(hunk.old, hunk.new) if hunk.ops is None else hunk.ops
    if any(is_marker(line) for line in hunk.old):
        return None
    match = similar_match(doc.lines, hunk.old, ops)
    if match is None:
        return None
    landed = _land(doc, Hunk(old=hunk.old, new=hunk.new, ops=tuple(ops)), match, path)
    return landed, match.start, match.end - match.start


def _land(doc: Doc, hunk: Hunk, match: Match, path: str) -> Doc:
    """`_land_at`, refused when the blank lines the edit shows can pair with the file's in
    another way that gives a different file (the new lines above or below a blank line)."""
    landed = _land_at(doc, hunk, match, path)
    if match.tier != "blank lines":
        return landed
    other = end_aligned(match, hunk.old)
    if other.amap != match.amap and _land_at(doc, hunk, other, path) != landed:
        where = next(a for a, b in zip(match.amap, other.amap, strict=True) if a != b)
        raise Ambiguous(
            f"{path} has more blank lines at line {(where or 0) + 1} than the edit shows, and "
            "its new lines could go above or below them; include those blank lines as context",
            path=path,
            lines=((where or 0) + 1,),
        )
    return landed


def _land_at(doc: Doc, hunk: Hunk, match: Match, path: str) -> Doc:
    restyle = restyler(doc.lines, hunk.new)
    if match.tier == "exact" and not doc.mixed:
        new = list(hunk.new) if restyle is None else [restyle(line) for line in hunk.new]
        return _splice(doc, match.start, match.end, new, [doc.eol] * len(new))
    plus = _plus_transform(doc, match, hunk)
    if restyle is not None:
        plus = _then(plus, restyle)
    old: Sequence[str] = hunk.old
    if hunk.ops is None and match.tier == "blank lines":
        old, match = _with_file_blanks(match, hunk.old)
    ops = diff_ops(old, hunk.new) if hunk.ops is None else hunk.ops
    if match.tier == "elision" and any(tag != " " and is_marker(text) for tag, text in ops):
        raise MalformedEdit(
            f"an elision marker (such as `...`) in the edit for {path} is added, removed or "
            "moved by the change; keep each one as an unchanged line in the same place, or "
            "write out the lines it stands for",
            path=path,
        )
    try:
        lines, eols = emit(doc, match, ops, plus)
    except UncertainPlacement as where:
        detail = (
            "between lines the edit removes, so they could be meant to go or to stay; show "
            "them, as removed or as context"
            if where.removal
            else "right where it adds lines, so the new lines could go above or below them; "
            "include those blank lines as context"
        )
        raise Ambiguous(
            f"{path} has lines at line {where.line + 1} that the edit does not show, {detail}",
            path=path,
            lines=(where.line + 1,),
        ) from None
    return _splice(doc, match.start, match.end, lines, eols)


def _with_file_blanks(match: Match, old: Sequence[str]) -> tuple[list[str], Match]:
    """The needle with its blank lines made the file's: missing ones put in, extra ones dropped.

    Without a diff from the format, the model's new text is what it wants the lines to become,
    so it is diffed against the lines the file really has; a blank line the model forgot to
    copy (or added) in the old text then neither doubles nor skews the pairing.
    """
    lines: list[str] = []
    amap: list[int | None] = []
    cursor = match.start
    for line, at in zip(old, match.amap, strict=True):
        if at is None and not line.strip():
            continue  # a blank line the file does not have
        if at is not None:
            lines.extend([""] * (at - cursor))  # blank lines the file has and the edit lacks
            amap.extend(range(cursor, at))
            cursor = at + 1
        lines.append(line)
        amap.append(at)
    repaired = Match(match.start, match.end, tuple(amap), match.tier, match.reindent)
    return lines, repaired


def _insertion_point(doc: Doc, hunk: Hunk, path: str, hint_shift: int) -> int:
    """Where a hunk with no old lines goes: the end of the file (`*** End of File`), its line
    number, or right below the one line its V4A `@@` anchor names."""
    if not doc.lines or hunk.at_eof:
        return len(doc.lines)
    if hunk.hint is not None:
        return max(0, min(len(doc.lines), hunk.hint + hint_shift))
    if hunk.anchor is not None and hunk.anchor.strip():
        key = fold(hunk.anchor.strip())
        found = [n for n, line in enumerate(doc.lines) if fold(line.strip()) == key]
        if len(found) == 1:
            return found[0] + 1
        if found:
            raise ambiguous(path, found, "exact", f"The `@@ {hunk.anchor.strip()}` line")
        raise MalformedEdit(
            f"a hunk for {path} adds lines below `@@ {hunk.anchor.strip()}`, but {path} has no "
            "such line; copy the line from the file, or include a few unchanged lines around "
            "the change",
            path=path,
        )
    raise MalformedEdit(
        f"a hunk for {path} adds lines without any context lines to place them; "
        "include a few unchanged lines around the change",
        path=path,
    )


def choose(
    found: Found,
    hunk: Hunk,
    doc: Doc,
    path: str,
    hint_shift: int = 0,
    *,
    after: int | None = None,
) -> Match:
    """The single candidate; end-of-file markers, V4A anchors and order, and line numbers
    only break ties."""
    ms = list(found.matches)
    if len(ms) > 1 and after is not None:
        below = [m for m in ms if m.start >= after]
        ms = below if len(below) == 1 else ms
    if len(ms) > 1 and hunk.at_eof:
        at_end = [m for m in ms if not any(line.strip() for line in doc.lines[m.end :])]
        ms = at_end or ms
    if len(ms) > 1 and hunk.anchor and hunk.anchor.strip():
        ms = _after_anchor(ms, doc.lines, hunk.anchor) or ms
    if len(ms) > 1 and hunk.hint is not None:
        target = hunk.hint + hint_shift
        ranked = sorted(ms, key=lambda m: abs(m.start - target))
        if abs(ranked[0].start - target) < abs(ranked[1].start - target):
            ms = ranked[:1]
    if len(ms) == 1:
        return ms[0]
    raise ambiguous(path, [m.start for m in ms], found.tier, WHAT)


def _after_anchor(ms: Sequence[Match], lines: Sequence[str], anchor: str) -> list[Match]:
    """For each line equal to the anchor, the first candidate at or below it."""
    key = fold(anchor.strip())
    chosen: dict[int, Match] = {}
    for n, line in enumerate(lines):
        if fold(line.strip()) != key:
            continue
        below = [m for m in ms if m.start >= n]
        if below:
            first = min(below, key=lambda m: m.start)
            chosen[first.start] = first
    return list(chosen.values())


def diff_ops(old: Sequence[str], new: Sequence[str]) -> list[tuple[Tag, str]]:
    """A line diff; every elision marker compares equal to every other, so gaps pair up."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    a = [_diff_key(line) for line in old[head : len(old) - tail]]
    b = [_diff_key(line) for line in new[head : len(new) - tail]]
    ops: list[tuple[Tag, str]] = [(" ", line) for line in old[:head]]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for code, i1, i2, j1, j2 in matcher.get_opcodes():
        if code == "equal":
            ops.extend((" ", line) for line in old[head + i1 : head + i2])
            continue
        ops.extend(("-", line) for line in old[head + i1 : head + i2])
        ops.extend(("+", line) for line in new[head + j1 : head + j2])
    ops.extend((" ", line) for line in old[len(old) - tail :])
    return ops


def _diff_key(line: str) -> str:
    return "\0elided" if is_marker(line) else line


def _then(first: Callable[[str], str], second: Callable[[str], str]) -> Callable[[str], str]:
    return lambda line: second(first(line))


def _plus_transform(doc: Doc, match: Match, hunk: Hunk) -> Callable[[str], str]:
    """How an added line is written: re-indented, and look-alikes folded as the match needed."""
    reindent = match.reindent
    table: dict[int, str] = {}
    if match.tier in ("unicode look-alikes", "blank lines", "elision"):
        region = "".join(doc.lines[match.start : match.end])
        used = {ord(c) for line in hunk.old for c in line}
        table = {
            code: str(ascii_form)
            for code, ascii_form in LOOKALIKES.items()
            if code in used and chr(code) not in region
        }
    if not table:
        return reindent.apply
    return lambda line: reindent.apply(line.translate(table))


class UncertainPlacement(Exception):
    """Added lines could go above or below blank lines the edit did not show (or, with
    `removal`, lines it did not show lie inside a run of lines it removes)."""

    def __init__(self, line: int, *, removal: bool = False) -> None:
        super().__init__(line)
        self.line = line
        self.removal = removal


def emit(
    doc: Doc, match: Match, ops: Sequence[tuple[Tag, str]], plus: Callable[[str], str]
) -> tuple[list[str], list[str]]:
    """The lines replacing `[match.start, match.end)`: file bytes for context, new lines added.

    File lines the needle did not account for (blank lines it lacked, elided gaps) stay, except
    inside a run of removed lines.
    """
    lines: list[str] = []
    eols: list[str] = []
    ahead = _next_placed(match, ops)
    cursor, index, prev = match.start, 0, " "
    for number, (tag, text) in enumerate(ops):
        if tag == "+":
            if prev == " " and ahead[number] > cursor:
                # Blank lines the edit did not show, right where it adds lines: the new lines
                # could go above or below them, and guessing would change the file's layout.
                raise UncertainPlacement(cursor)
            lines.append(plus(text))
            eols.append(doc.eol)
            prev = "+"
            continue
        at = match.amap[index]
        index += 1
        if at is None:
            if tag == " " and is_marker(text) and ahead[number] > cursor:
                # The elided gap sits here, before whatever the edit adds after the marker.
                lines.extend(doc.lines[cursor : ahead[number]])
                eols.extend(doc.eols[cursor : ahead[number]])
                cursor = ahead[number]
            continue
        if tag == "-" and prev == "-" and at > cursor:
            # Lines the edit does not show, between two it removes: kept or removed with them?
            raise UncertainPlacement(cursor, removal=True)
        lines.extend(doc.lines[cursor:at])
        eols.extend(doc.eols[cursor:at])
        if tag == " ":
            lines.append(doc.lines[at])
            eols.append(doc.eols[at])
        cursor, prev = at + 1, tag
    lines.extend(doc.lines[cursor : match.end])
    eols.extend(doc.eols[cursor : match.end])
    return lines, eols


def _next_placed(match: Match, ops: Sequence[tuple[Tag, str]]) -> list[int]:
    """For each op, the file line of the next old line (-1 when that line has no counterpart)."""
    placed: list[int | None] = []
    index = 0
    for tag, _ in ops:
        if tag == "+":
            placed.append(None)
        else:
            placed.append(match.amap[index])
            index += 1
    out = [match.end] * len(ops)
    upcoming = match.end
    for number in range(len(ops) - 1, -1, -1):
        out[number] = upcoming
        if ops[number][0] != "+":
            at = placed[number]
            upcoming = -1 if at is None else at
    return out


def _splice(doc: Doc, start: int, end: int, lines: list[str], eols: list[str]) -> Doc:
    """Replace lines `[start, end)`, keeping the file's final-newline state."""
    all_lines = [*doc.lines[:start], *lines, *doc.lines[end:]]
    all_eols = [*doc.eols[:start], *eols, *doc.eols[end:]]
    fill = doc.eol
    if lines and end == len(doc.lines):
        # The new text now ends the file, so it takes over the file's final-newline state;
        # lines deleted from the end leave the line above them as it was.
        last = start + len(lines) - 1
        all_eols[last] = (all_eols[last] or fill) if doc.final_newline else ""
    if "" in all_eols[:-1]:
        all_eols[:-1] = [eol or fill for eol in all_eols[:-1]]
    # New lines take the dominant ending, so the file's mix of endings stays as it was.
    return Doc(
        lines=tuple(all_lines), eols=tuple(all_eols), bom=doc.bom, eol=doc.eol, mixed=doc.mixed
    )
