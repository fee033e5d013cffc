"""A second, independent reading of a command line's heredocs, line by line as bash reads them.

tree-sitter-bash has misread heredocs before (several on one line, `<<-`, quotes in the body);
the parser compares its bodies with these, and a line where the two disagree is asked about
rather than trusted.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Heredoc", "read_heredocs", "strip_tabs"]

_WORD_END = frozenset(" \t\n;&|<>()")


@dataclass(frozen=True, slots=True)
class Heredoc:
    """One heredoc: its delimiter with quotes removed, whether quoted, and its body."""

    delimiter: str
    quoted: bool
    strip: bool
    """`<<-`: leading tabs are removed from each line."""
    body: str
    closed: bool
    """The delimiter line was found; an unclosed heredoc runs to the end of the input."""


def strip_tabs(body: str) -> str:
    """A `<<-` body as bash passes it on: every line without its leading tabs."""
    return "".join(line.lstrip("\t") for line in body.splitlines(keepends=True))


def read_heredocs(source: str) -> list[Heredoc] | None:
    """Every heredoc of `source` in order; None when the line is too unusual to read here."""
    out: list[Heredoc] = []
    pending: list[tuple[str, bool, bool]] = []
    i, n = 0, len(source)
    quote = ""
    while i < n:
        ch = source[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or source[i - 1] in " \t\n;&|()"):
            stop = source.find("\n", i)
            i = n if stop < 0 else stop
            continue
        elif source.startswith("<<<", i):
            i += 3
            continue
        elif source.startswith("<<", i):
            strip = source.startswith("<<-", i)
            found = _delimiter(source, i + (3 if strip else 2))
            if found is None:
                return None
            delimiter, quoted, i = found
            pending.append((delimiter, quoted, strip))
            continue
        elif ch == "\n" and pending:
            i = _bodies(source, i + 1, pending, out)
            pending = []
            continue
        i += 1
    if pending:
        _bodies(source, n, pending, out)
    return out


def _delimiter(source: str, i: int) -> tuple[str, bool, int] | None:
    """The delimiter word that starts at or after `i`: (text, quoted, index after it)."""
    while i < len(source) and source[i] in " \t":
        i += 1
    word: list[str] = []
    quoted = False
    quote = ""
    while i < len(source):
        ch = source[i]
        if quote:
            if ch == quote:
                quote = ""
            else:
                word.append(ch)
        elif ch in "'\"":
            quote, quoted = ch, True
        elif ch == "\\" and i + 1 < len(source):
            word.append(source[i + 1])
            quoted = True
            i += 1
        elif ch == "$" or ch == "`":
            return None  # `<<$X`: rare, and not worth guessing
        elif ch in _WORD_END:
            break
        else:
            word.append(ch)
        i += 1
    if quote or not word:
        return None
    return "".join(word), quoted, i


def _bodies(source: str, i: int, pending: list[tuple[str, bool, bool]], out: list[Heredoc]) -> int:
    """Read the bodies of `pending` heredocs from line start `i`; return where reading ends."""
    for delimiter, quoted, strip in pending:
        lines: list[str] = []
        closed = False
        while i < len(source):
            stop = source.find("\n", i)
            end = len(source) if stop < 0 else stop + 1
            line = source[i:end]
            i = end
            bare = line.rstrip("\n")
            if (bare.lstrip("\t") if strip else bare) == delimiter:
                closed = True
                break
            lines.append(line)
        body = "".join(lines)
        out.append(Heredoc(delimiter, quoted, strip, strip_tabs(body) if strip else body, closed))
    return i
