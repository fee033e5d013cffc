"""Indentation: how the model's lines map onto the file's, and re-indenting new lines to match."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

TAB_WIDTHS = (4, 8, 2)
"""Tab widths tried, most common first, when tabs and spaces are mixed up."""


def indent_of(line: str) -> str:
    """The leading whitespace of `line`."""
    return line[: len(line) - len(line.lstrip())]


def _width(indent: str, tab: int) -> int:
    return len(indent.expandtabs(tab))


@dataclass(frozen=True, slots=True)
class Reindent:
    """Turns an indentation written by the model into the file's.

    `prefix` is added to (or, when `remove`, taken from) each line's indentation; otherwise
    indentation is measured in columns with tabs `tab` wide, shifted by `shift` columns and
    written with tabs when `use_tabs`.
    """

    prefix: str = ""
    remove: bool = False
    tab: int = 0
    shift: int = 0
    use_tabs: bool = False

    @property
    def identity(self) -> bool:
        """True when lines keep their indentation as written."""
        return not self.prefix and not self.tab

    def apply(self, line: str) -> str:
        """`line` with its indentation written the file's way.

        A whitespace-only line keeps its width (models rarely shift those with the rest) but
        takes the file's tabs or spaces.
        """
        if self.identity or not line:
            return line
        if not line.strip():
            if not self.tab:
                return line
            return Reindent(tab=self.tab, use_tabs=self.use_tabs).apply(line + "x")[:-1]
        indent = indent_of(line)
        body = line[len(indent) :]
        if self.prefix and not self.remove:
            return self.prefix + line
        if self.prefix:
            cut = 0
            while cut < min(len(indent), len(self.prefix)) and indent[cut] == self.prefix[cut]:
                cut += 1
            return indent[cut:] + body
        columns = max(0, _width(indent, self.tab) + self.shift)
        if self.use_tabs:
            return "\t" * (columns // self.tab) + " " * (columns % self.tab) + body
        return " " * columns + body


IDENTITY = Reindent()


def find_reindent(pairs: Sequence[tuple[str, str]]) -> Reindent | None:
    """One consistent mapping from the model's indentation to the file's, or `None`.

    `pairs` holds (model line, file line) for the non-blank lines of a candidate match.
    """
    if not pairs:
        return IDENTITY
    given = [indent_of(a) for a, _ in pairs]
    found = [indent_of(b) for _, b in pairs]
    if given == found:
        return IDENTITY
    g0, f0 = given[0], found[0]
    if f0.endswith(g0):
        extra = f0[: len(f0) - len(g0)]
        if all(f == extra + g for g, f in zip(given, found, strict=True)):
            return Reindent(prefix=extra)
    if g0.endswith(f0):
        extra = g0[: len(g0) - len(f0)]
        if all(g == extra + f for g, f in zip(given, found, strict=True)):
            return Reindent(prefix=extra, remove=True)
    use_tabs = any("\t" in f for f in found)
    for tab in TAB_WIDTHS:
        shift = _width(f0, tab) - _width(g0, tab)
        if all(_width(f, tab) - _width(g, tab) == shift for g, f in zip(given, found, strict=True)):
            return Reindent(tab=tab, shift=shift, use_tabs=use_tabs)
    return None


def _space_unit(widths: Sequence[int]) -> int | None:
    """The indentation step of a space-indented file: 4, then 2, when most indented lines are
    a multiple of it (continuation lines aligned under a bracket are not)."""
    if not widths:
        return None
    for unit in (4, 2):
        if sum(1 for w in widths if w % unit == 0) > 0.5 * len(widths):
            return unit
    return None


def restyler(file_lines: Sequence[str], added: Sequence[str]) -> Callable[[str], str] | None:
    """How to rewrite `added` lines whose indentation contradicts a file that is consistent:
    tabs written into a file indented only with spaces become the file's step in spaces, and
    spaces written into a file indented only with tabs become tabs (by the edit's own step).
    `None` when nothing contradicts the file or the file mixes both."""
    tabbed = [line for line in added if line.strip() and "\t" in indent_of(line)]
    spaced = [line for line in added if line.strip() and indent_of(line).startswith(" ")]
    if not tabbed and not spaced:
        return None
    if not tabbed and not _first_indent(file_lines).startswith("\t"):
        return None  # Spaces into a file that does not start out tab-indented: nothing to do.
    tab_lines = space_lines = 0
    widths: list[int] = []
    for line in file_lines:
        indent = indent_of(line)
        if not indent or not line.strip():
            continue
        if indent.startswith("\t"):
            tab_lines += 1
        elif "\t" in indent:
            return None
        else:
            space_lines += 1
            widths.append(len(indent))
    if tabbed and not tab_lines:
        unit = _space_unit(widths)
        return None if unit is None else partial(_tabs_to_spaces, unit=unit)
    if spaced and tab_lines and not space_lines:
        step = _space_unit([len(indent_of(line)) for line in spaced]) or 4
        return partial(_spaces_to_tabs, step=step)
    return None


def _first_indent(file_lines: Sequence[str]) -> str:
    return next((indent_of(line) for line in file_lines if line.strip() and indent_of(line)), "")


def _tabs_to_spaces(line: str, *, unit: int) -> str:
    indent = indent_of(line)
    if "\t" not in indent or not line.strip():
        return line
    columns = sum(unit if ch == "\t" else 1 for ch in indent)
    return " " * columns + line[len(indent) :]


def _spaces_to_tabs(line: str, *, step: int) -> str:
    indent = indent_of(line)
    if not indent.startswith(" ") or "\t" in indent or not line.strip():
        return line
    return "\t" * (len(indent) // step) + " " * (len(indent) % step) + line[len(indent) :]
