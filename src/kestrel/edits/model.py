"""The parsed form every edit format is turned into: a sequence of steps over paths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Tag = Literal[" ", "-", "+"]
"""A hunk line: context kept, line removed, line added."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hunk:
    """Lines to find (`old`) and what they become (`new`), with optional placement hints.

    `ops` pairs them line by line when the format says which lines are context; when it is
    `None` (SEARCH/REPLACE, str_replace) the pairing is worked out by a diff when needed.
    """

    old: tuple[str, ...]
    new: tuple[str, ...]
    ops: tuple[tuple[Tag, str], ...] | None = None
    hint: int | None = None
    """0-based line of the original file where the format says the hunk starts."""
    anchor: str | None = None
    """A line (V4A `@@ def f():`) that the hunk follows somewhere above it."""
    at_eof: bool = False


def hunk_from_ops(
    ops: Sequence[tuple[Tag, str]],
    *,
    hint: int | None = None,
    anchor: str | None = None,
    at_eof: bool = False,
) -> Hunk:
    """A hunk from diff-style lines, deriving its old and new sides."""
    old = tuple(text for tag, text in ops if tag != "+")
    new = tuple(text for tag, text in ops if tag != "-")
    return Hunk(old=old, new=new, ops=tuple(ops), hint=hint, anchor=anchor, at_eof=at_eof)


@dataclass(frozen=True, slots=True, kw_only=True)
class Update:
    """Change an existing file by one hunk."""

    path: str
    hunk: Hunk
    ends_with_newline: bool = False
    """Whether the file is written with a final newline whatever it had (apply_patch: its
    reference implementation writes every updated file that way)."""
    in_order: bool = False
    """Whether the file's hunks come in file order (apply_patch: its reference implementation
    looks for each below the previous one), so order breaks ties."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Replace:
    """str_replace: swap an exact substring, with tolerant line matching as a fallback."""

    path: str
    old: str
    new: str
    replace_all: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Create:
    """Create a file (`overwrite` allows replacing an existing empty or same file)."""

    path: str
    content: str
    overwrite: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Delete:
    """Delete an existing file."""

    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """Rename an existing file to a path that does not exist."""

    path: str
    to: str


Step = Update | Replace | Create | Delete | Move
"""One block of an edit; blocks apply in order and are numbered from 1 in reports."""
