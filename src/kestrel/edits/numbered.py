"""Old text copied from a read with its line numbers still on (`    12\tcode`, `12 | code`).

Such text matches nowhere as written. It is taken without the numbers only when they prove
where it was copied from: every numbered line carries the number of its own position (the
first number plus its index in the text), and the text without them is found starting at
exactly that line. New lines lose the same prefixes when every non-blank one has one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_PREFIX = re.compile(r"\s*(\d+)(?:\t| \| | │ |→|: )")


@dataclass(frozen=True, slots=True)
class Unnumbered:
    """The old and new lines without their numbers, and the 0-based file line they claim."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    start: int


def strip_numbers(old: Sequence[str], new: Sequence[str]) -> Unnumbered | None:
    """`old` and `new` without read line numbers, or `None` when `old` is not such a copy."""
    first: int | None = None
    bare: list[str] = []
    for index, line in enumerate(old):
        found = _PREFIX.match(line)
        if found is None:
            if line.strip():
                return None
            bare.append(line)  # A blank line copied without its number.
            continue
        number = int(found.group(1))
        first = number - index if first is None else first
        if number != first + index:
            return None
        bare.append(line[found.end() :])
    if first is None or first < 1:
        return None
    shown = [line for line in new if line.strip()]
    numbered = bool(shown) and all(_PREFIX.match(line) for line in shown)
    fresh = [_unnumber(line) for line in new] if numbered else list(new)
    return Unnumbered(old=tuple(bare), new=tuple(fresh), start=first - 1)


def _unnumber(line: str) -> str:
    found = _PREFIX.match(line)
    return line if found is None else line[found.end() :]
