"""Refusals the model can act on: the closest lines the file really has, and candidate lists."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence

from kestrel.edits.errors import Ambiguous, NoMatch
from kestrel.edits.match import fold

DIFF_MAX_LINES = 24
SHOWN_CANDIDATES = 10


def _key(line: str) -> str:
    return fold("".join(line.split()))


def closest_start(lines: Sequence[str], needle: Sequence[str]) -> int | None:
    """0-based start of the file stretch sharing the most lines with `needle` (ignoring spacing)."""
    where: dict[str, list[int]] = {}
    wanted = {_key(line) for line in needle if line.strip()}
    for n, line in enumerate(lines):
        key = _key(line)
        if key in wanted:
            where.setdefault(key, []).append(n)
    votes: Counter[int] = Counter()
    for i, line in enumerate(needle):
        for n in where.get(_key(line), [])[:50] if line.strip() else []:
            votes[n - i] += 1
    if votes:
        return max(0, votes.most_common(1)[0][0])
    first = next((line.strip() for line in needle if line.strip()), "")
    keys = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, keys, n=1, cutoff=0.6)
    if not close:
        return None
    return keys.index(close[0]) - next(i for i, line in enumerate(needle) if line.strip())


def no_match(path: str, lines: Sequence[str], needle: Sequence[str], what: str) -> NoMatch:
    """The refusal for text that is nowhere in the file, showing where it comes closest."""
    head = f"{what} was not found in {path}"
    start = closest_start(lines, needle)
    if start is None:
        message = (
            f"{head}, not even with whitespace, indentation and blank lines ignored. "
            "Read the file again and copy the exact lines."
        )
        return NoMatch(message, path=path)
    start = max(0, min(start, max(0, len(lines) - 1)))
    window = tuple(lines[start : start + max(1, len(needle))])
    diff = list(
        difflib.unified_diff(list(needle), list(window), "your text", "file", lineterm="", n=1)
    )[2:]
    if len(diff) > DIFF_MAX_LINES:
        diff = [*diff[:DIFF_MAX_LINES], f"[... {len(diff) - DIFF_MAX_LINES} more diff lines]"]
    shown = "\n".join(f"{start + k + 1:>6}\t{line}" for k, line in enumerate(window[:12]))
    more = f"\n[... {len(window) - 12} more lines]" if len(window) > 12 else ""
    message = (
        f"{head}. The closest lines in the file are at line {start + 1}:\n{shown}{more}\n"
        f"How your text differs from them (- yours, + the file's):\n" + "\n".join(diff)
    )
    return NoMatch(message, path=path, closest_line=start + 1, closest=window, diff="\n".join(diff))


def ambiguous(path: str, starts: Sequence[int], tier: str, what: str) -> Ambiguous:
    """The refusal for text found in several places: where each one starts."""
    lines = tuple(sorted(s + 1 for s in starts))
    shown = ", ".join(str(n) for n in lines[:SHOWN_CANDIDATES])
    if len(lines) > SHOWN_CANDIDATES:
        shown += f" and {len(lines) - SHOWN_CANDIDATES} more"
    how = "" if tier == "exact" else f" (matching with {tier} tolerated)"
    message = (
        f"{what} matches {len(lines)} places in {path}{how}, starting at lines {shown}; "
        "include more surrounding lines so that it matches exactly one"
    )
    return Ambiguous(message, path=path, lines=lines)
