"""Just enough of a sed script's grammar to find the commands that run programs (`e`, `s///e`)
and write files (`w`, `W`, `s///w`)."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"\s*(\d+(~\d+)?|\$|/(?:[^/\\]|\\.)*/[IM]*|\\(.)(?:(?!\3).|\\.)*\3)?")
_TO_EOL = frozenset("aicwWrRe:lLqQvF=")
_LABEL = frozenset("btT")


def sed_commands(program: str) -> tuple[bool, bool]:
    """(runs a program, writes a file) for one sed script; a script it cannot read counts as
    both, so the caller asks."""
    i, n = 0, len(program)
    runs = writes = False
    while i < n:
        while i < n and program[i] in " \t\n;{}!":
            i += 1
        if i >= n:
            break
        for _ in range(2):  # an address, then `,address`
            m = _ADDRESS.match(program, i)
            i = m.end() if m else i
            if i < n and program[i] == ",":
                i += 1
        while i < n and program[i] in " \t!":
            i += 1
        if i >= n:
            break
        command = program[i]
        i += 1
        if command in "sy":
            end = _skip_parts(program, i)
            if end is None:
                return True, True
            flags = re.match(r"[^;\n}]*", program[end:])
            text = flags.group(0) if flags else ""
            runs |= command == "s" and "e" in text.split("w")[0]
            writes |= command == "s" and "w" in text
            i = end + len(text)
        elif command in _TO_EOL:
            runs |= command == "e"
            writes |= command in "wW"
            i = _line_end(program, i, command in "aic")
        elif command in _LABEL:  # a label runs to `;` or the end of the line
            while i < n and program[i] not in ";\n}":
                i += 1
        elif command in "{}=dDgGhHlnNpPqQxz#":
            if command == "#":
                stop = program.find("\n", i)
                i = n if stop < 0 else stop
        else:
            return True, True
    return runs, writes


def _line_end(program: str, i: int, text: bool) -> int:
    """Where the argument of a command that reads to the end of the line stops; the text of
    `a`, `i` and `c` goes on while a line ends with a backslash."""
    while True:
        stop = program.find("\n", i)
        if stop < 0:
            return len(program)
        if not (text and stop > 0 and program[stop - 1] == "\\"):
            return stop
        i = stop + 1


def _skip_parts(program: str, i: int) -> int | None:
    """The index after the pattern and replacement of `s` or `y`; None when they do not end."""
    if i >= len(program) or program[i] in "\\\n":
        return None
    delimiter = program[i]
    i += 1
    for _ in range(2):
        while i < len(program) and program[i] != delimiter:
            i += 2 if program[i] == "\\" else 1
        if i >= len(program):
            return None
        i += 1
    return i
