"""Settling a lazy edit whose anchors fit several places, by the lines the edit shows.

An anchor line such as `pass`, `)` or `\"\"\"` often occurs many times in a file, while the lines
the model copied around it occur together only once. For each stretch, every pair of places its
first and last lines can take is a reading of the edit, judged two ways:

- by its ends: how many of the stretch's leading lines equal the file's from the region's start
  on (`head`), how many trailing lines equal the file's up to its end (`tail`), and how many
  region lines those runs leave unaccounted for (`unproven`: deleted or rewritten unseen);
- by its content: how many lines the reading deletes, rewrites or adds, over the longest run of
  lines the stretch and the region have in common, in order (`changed`).

A reading is chosen only when no other is better on any of the four counts and every other is
worse on at least one. The two views fail differently: the ends alone prefer a short region
even when the stretch repeats the lines just after it; the content alone prefers rewriting a
neighbouring function into a new one over inserting that new function beside it. Where they
disagree, the edit could mean either, and it stays ambiguous. Where the ends prove equally
much, the smaller region wins only if it leaves no file line unaccounted for: choosing between
two readings that each delete lines the edit does not show would be a guess. The chosen pairs
must still lie in the edit's order.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_PAIRS = 64
"""Most (start, end) pairs compared for one stretch before it counts as ambiguous."""


@dataclass(frozen=True, slots=True)
class Choice:
    """One stretch's candidate region `[start, end]` and how well the edit fits there."""

    start: int
    end: int
    head: int
    tail: int
    unproven: int
    changed: int

    def beats(self, other: Choice) -> bool:
        """No worse than `other` on any count and better on one; when the ends prove no more
        than `other`'s, only by leaving nothing unseen (a guess between two deletions is no
        proof)."""
        mine = (self.head, self.tail, -self.unproven, -self.changed)
        theirs = (other.head, other.tail, -other.unproven, -other.changed)
        if not all(a >= b for a, b in zip(mine, theirs, strict=True)) or mine == theirs:
            return False
        return mine[:2] != theirs[:2] or self.unproven == 0


def run_from(
    file_lines: Sequence[str], start: int, wanted: Sequence[str], key: Callable[[str], str]
) -> int:
    """How many of `wanted`, from the first on, equal the file's lines from `start` on."""
    n = 0
    while n < len(wanted) and start + n < len(file_lines):
        if wanted[n] != key(file_lines[start + n]):
            break
        n += 1
    return n


def run_back(
    file_lines: Sequence[str], end: int, wanted: Sequence[str], key: Callable[[str], str]
) -> int:
    """How many of `wanted`, from the last back, equal the file's lines up to `end`."""
    n = 0
    while n < len(wanted) and end - n >= 0:
        if wanted[-1 - n] != key(file_lines[end - n]):
            break
        n += 1
    return n


def best_region(
    file_lines: Sequence[str],
    lines: Sequence[str],
    starts: Sequence[int],
    ends: Sequence[int],
    key: Callable[[str], str],
    *,
    same: bool = False,
) -> Choice | None:
    """The one region `[start, end]` that beats every other, or `None`. With `same`, the
    stretch is one anchor line, which is both ends of its region."""
    pairs = [(s, e) for s in starts for e in ends if e >= s and (not same or e == s)]
    if not pairs or len(pairs) > MAX_PAIRS:
        return None
    wanted = [key(line) for line in lines]
    heads = {s: run_from(file_lines, s, wanted, key) for s in starts}
    tails = {e: run_back(file_lines, e, wanted, key) for e in ends}
    choices = []
    for start, end in pairs:
        size = end - start + 1
        ends_proven = heads[start] + tails[end]
        region = [key(line) for line in file_lines[start : end + 1]]
        matcher = difflib.SequenceMatcher(None, region, wanted, autojunk=False)
        kept = sum(block.size for block in matcher.get_matching_blocks())
        changed = (size - kept) + (len(wanted) - kept)
        unproven = max(0, size - ends_proven)
        choices.append(Choice(start, end, heads[start], tails[end], unproven, changed))
    for choice in choices:
        if all(choice.beats(other) for other in choices if other is not choice):
            return choice
    return None
