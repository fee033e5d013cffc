"""Which lazy edits the format cannot say, for `bench/lazy_cases.py`: such cases expect a
refusal rather than the commit's file."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """File-before lines `[start, stop)` shown in the edit, and after-lines `[a_start, a_stop)`."""

    start: int
    stop: int
    a_start: int
    a_stop: int


def drops_unshown(before: Sequence[str], after: Sequence[str], shown: list[Group]) -> bool:
    """Whether the edit, with no marker above (below) it, drops lines at the top (bottom) of
    the file that it neither shows elsewhere (moved) nor writes new lines over: that reads the
    same as an edit whose marker was forgotten, so the format cannot say it and the edit must
    be refused."""
    if not shown:
        return False
    top, end = shown[0], shown[-1]
    if top.start == 0 and _drops_top(before[: top.stop], after[: top.a_stop]):
        return True
    if end.stop < len(before):
        return False
    return _drops_top(before[end.start :][::-1], after[end.a_start :][::-1])


def _drops_top(before: Sequence[str], after: Sequence[str]) -> bool:
    # A byte order mark is not content: the file's first line holding only one is blank.
    f = [line.strip(" \t\ufeff") for line in before if line.strip(" \t\ufeff")]
    e = [line.strip(" \t\ufeff") for line in after if line.strip(" \t\ufeff")]
    if not f or not e or e[0] == f[0]:
        return False
    new_above = next((n for n, line in enumerate(e) if line in set(f)), None)
    if new_above is None:
        return False
    j = f.index(e[new_above])
    spare = Counter(e)
    spare.subtract(f[j:])
    dropped = 0
    for line in f[:j]:
        if spare[line] > 0:
            spare[line] -= 1
        else:
            dropped += 1
    return dropped > new_above
