"""Settling a lazy edit whose anchors fit several places, by the lines the edit shows.

An anchor line such as `pass`, `)` or `\"\"\"` often occurs many times in a file, while the lines
the model copied around it occur together only once. For each stretch, every pair of places its
first and last lines can take is a reading of the edit, scored by how many of the stretch's
leading lines equal the file's from the region's start on (`head`), how many trailing lines
equal the file's up to its end (`tail`), and how many lines the reading removes on balance
(`net`: the region's length less the stretch's, when positive; whatever the pairing, that many
file lines disappear without the edit showing a line in their place).

A reading is chosen only when it beats every other:

- its ends prove more (head and tail no shorter, one longer) and it removes no more, and the
  other's ends are not strong themselves (`STRONG` lines at both ends: a twin block); or
- its ends prove as much, it removes nothing while the other removes lines, and its content
  agrees: over the longest run of lines the stretch and the region have in common, it changes
  no more lines than the other reading (`changed`). Where the content disagrees (the new code
  resembles the code next to it, so rewriting that code reads as well as inserting beside it)
  the edit could mean either.

Between readings whose ends prove as much, the chosen one must also keep at least as many of
the stretch's lines (where code repeats, a region above may hold more of them, read as a
deletion of what lies between). Where the ends prove more but both readings remove lines and
keep as many of the stretch's, which lines go is a guess, and the edit is refused.
A reading under which the stretch changes nothing is never chosen over one that removes lines:
the model may have written the stretch to delete them. Otherwise the edit stays ambiguous and is
refused. Choosing between two readings that each remove lines the edit does not show would be a
guess, so that never decides. The chosen pairs must still lie in the edit's order.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_PAIRS = 4096
"""Most (start, end) pairs compared for one stretch before it counts as ambiguous."""
STRONG = 3
"""Lines of matching context at both ends that make a reading a real candidate, however much
more another reading's ends prove (a twin block, as tests repeat)."""
MAX_CONTENT = 64
"""Most readings whose content is compared with the chosen one's."""


@dataclass(frozen=True, slots=True)
class Choice:
    """One stretch's candidate region `[start, end]` and how well its ends fit there."""

    start: int
    end: int
    head: int
    tail: int
    net: int


class _Content:
    """How many of the stretch's lines a reading keeps (the longest common run of lines, in
    order) and how many it changes; computed on demand, at most `MAX_CONTENT` times."""

    def __init__(
        self, file_lines: Sequence[str], wanted: Sequence[str], key: Callable[[str], str]
    ) -> None:
        self.file_lines, self.wanted, self.key = file_lines, wanted, key
        self.known: dict[tuple[int, int], int] = {}
        self.counts: Counter[str] | None = None

    @property
    def exhausted(self) -> bool:
        return len(self.known) >= MAX_CONTENT

    def kept(self, choice: Choice) -> int:
        at = (choice.start, choice.end)
        if at not in self.known:
            region = [self.key(line) for line in self.file_lines[choice.start : choice.end + 1]]
            matcher = difflib.SequenceMatcher(None, region, self.wanted, autojunk=False)
            self.known[at] = sum(block.size for block in matcher.get_matching_blocks())
        return self.known[at]

    def shares_unique(self, choice: Choice, besides: Choice) -> bool:
        """Whether a line of `choice`'s region outside `besides`'s, paired with a line of the
        stretch, occurs only once in the file."""
        if self.counts is None:
            self.counts = Counter(self.key(line) for line in self.file_lines)
        region = [self.key(line) for line in self.file_lines[choice.start : choice.end + 1]]
        matcher = difflib.SequenceMatcher(None, region, self.wanted, autojunk=False)
        for block in matcher.get_matching_blocks():
            for n in range(choice.start + block.a, choice.start + block.a + block.size):
                inside = besides.start <= n <= besides.end
                if not inside and self.counts[region[n - choice.start]] == 1:
                    return True
        return False

    def removed(self, choice: Choice) -> int:
        """The region's lines that are not among the stretch's (what the reading deletes)."""
        return choice.end - choice.start + 1 - self.kept(choice)

    def changed(self, choice: Choice) -> int:
        kept = self.kept(choice)
        return (choice.end - choice.start + 1 - kept) + (len(self.wanted) - kept)


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
    choices = [
        Choice(s, e, heads[s], tails[e], max(0, (e - s + 1) - len(wanted))) for s, e in pairs
    ]
    top = max(choices, key=lambda c: (c.head + c.tail, -c.net))
    unchanged = [key(line) for line in file_lines[top.start : top.end + 1]] == list(wanted)
    if unchanged and any(c.net > 0 for c in choices):
        return None  # Read there the stretch changes nothing; another reading removes lines.
    content = _Content(file_lines, wanted, key)
    for other in choices:
        if other is top:
            continue
        if other.head > top.head or other.tail > top.tail or other.net < top.net:
            return None
        if (other.head, other.tail) != (top.head, top.tail):
            if min(other.head, other.tail) >= min(STRONG, len(wanted) // 2):
                return None  # Its ends prove it too: a twin of the region (repeated code).
            if top.net > 0 and other.net > top.net and _keeps_as_many(other, top, content):
                return None  # Both remove lines and keep as much: which lines is a guess.
            continue  # Its ends prove less.
        if top.net > 0 or content.exhausted:
            return None
        if other.net == 0 and not _only_top_keeps_all(top, other, content):
            return None
        if content.changed(other) < content.changed(top):
            return None
        if not _keeps_as_much(top, other, content, len(wanted)) and not _fewer_changes(
            top, other, content
        ):
            return None
    return top


def past_empty_markers(
    file_lines: Sequence[str],
    lines: Sequence[str],
    places: tuple[Sequence[int], Sequence[int]],
    key: Callable[[str], str],
    *,
    same: bool,
    bounds: tuple[int | None, int | None],
) -> Choice | None:
    """A second look at a stretch `best_region` left unsettled, when the edit's top (bottom)
    marker would stand for no line of the file at some of its places (a start at or above the
    first non-blank line `bounds[0]`, an end at or below the last one `bounds[1]`). Those
    places are dropped only when their ends also prove less than the reading that wins
    without them and less than `STRONG` lines: an empty marker alone is no proof, as models
    write one at a file's end, and a twin block there may be the one meant."""
    above, below = bounds
    starts = [n for n in places[0] if above is None or n > above]
    stops = [n for n in places[1] if below is None or n < below]
    if same:
        starts = stops = [n for n in starts if n in set(stops)]
    gone_starts = [n for n in places[0] if n not in set(starts)]
    gone_stops = [n for n in places[1] if n not in set(stops)]
    if not (gone_starts or gone_stops) or not starts or not stops:
        return None
    choice = best_region(file_lines, lines, starts, stops, key, same=same)
    if choice is None:
        return None
    wanted = [key(line) for line in lines]
    head = min(choice.head, STRONG)
    if any(run_from(file_lines, n, wanted, key) >= head for n in gone_starts):
        return None
    tail = min(choice.tail, STRONG)
    if any(run_back(file_lines, n, wanted, key) >= tail for n in gone_stops):
        return None
    return choice


def _only_top_keeps_all(top: Choice, other: Choice, content: _Content) -> bool:
    """Whether every line of `top`'s region is a line of the stretch while `other`'s region
    holds lines the stretch leaves out: `other` deletes code though it is no longer than the
    stretch (the new code resembles the code it would overwrite)."""
    if content.exhausted:
        return False
    return content.removed(top) == 0 and content.removed(other) > 0


def _fewer_changes(top: Choice, other: Choice, content: _Content) -> bool:
    """Whether `top` deletes nothing and changes fewer lines than `other`, which deletes code,
    and `other` holds more of the stretch's lines only because the new code resembles code
    repeated in the file: a line it shares with the stretch that occurs once in the file says
    the stretch rewrites that code (the insertion would leave the file with it twice)."""
    if content.removed(top) or content.changed(top) >= content.changed(other):
        return False
    return not content.shares_unique(other, top)


def _keeps_as_many(other: Choice, top: Choice, content: _Content) -> bool:
    """Whether `other` keeps as many of the stretch's lines as `top` (unknown counts as yes)."""
    if content.exhausted:
        return True
    return content.kept(other) >= content.kept(top)


def _keeps_as_much(top: Choice, other: Choice, content: _Content, size: int) -> bool:
    """Whether `top` keeps at least as many of the stretch's lines as `other` does (the file
    has repeated code: another region may hold more of them, as a deletion reading)."""
    if min(other.end - other.start + 1, size) <= content.kept(top):
        return True  # `other` cannot keep more.
    if content.exhausted:
        return False
    return content.kept(other) <= content.kept(top)
