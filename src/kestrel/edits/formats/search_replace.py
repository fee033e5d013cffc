"""SEARCH/REPLACE blocks after a path line, fenced or not (the Aider and Cline spellings)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kestrel.edits.doc import split_edit_lines
from kestrel.edits.errors import MalformedEdit
from kestrel.edits.model import Create, Hunk, Step, Update

_START = re.compile(r"\s*(?:<{3,}|-{3,}) SEARCH>?\s*")
_DIVIDER = re.compile(r"={3,}")
_END = re.compile(r"\s*(?:>{3,}|\+{3,}) REPLACE\s*")
_FENCE = re.compile(r"\s*(`{3,}|~{3,})[\w.+#-]*\s*")
_HINT = re.compile(r"\s*:(start|end)_line:\s*(\d+)\s*")
_HINT_END = re.compile(r"\s*-{3,}\s*")
"""Roo-Code's block head: `:start_line:N` (and `:end_line:N`) lines, then `-------`."""
_LOOSE_MARKER = re.compile(r"\s*(?:[<>=+-]{2,}.*(?:SEARCH|REPLACE)|[<>=+-]*\s*={3,}\s*.*)")


def parse_search_replace(text: str, files: Mapping[str, str]) -> list[Step]:
    """Steps from the blocks in `text`; each block names its file on a line above it."""
    lines = split_edit_lines(text)
    steps: list[Step] = []
    path: str | None = None
    i = 0
    last_end = 0
    while i < len(lines):
        if not _START.fullmatch(lines[i]):
            _refuse_stray_marker(lines[i], i)
            i += 1
            continue
        path = _path_above(lines, last_end, i, files) or path
        if path is None:
            path = _only_file(files, i)
        hint, i = _hint(lines, i + 1)
        search, replace, i = _block(lines, i, files.get(path))
        steps.append(_step(path, search, replace, files, hint))
        last_end = i
    if not steps:
        raise MalformedEdit(
            "no SEARCH/REPLACE block found; write the file path on its own line, then\n"
            "<<<<<<< SEARCH\n(lines to find)\n=======\n(lines to put instead)\n>>>>>>> REPLACE"
        )
    return steps


def _refuse_stray_marker(line: str, index: int) -> None:
    if (
        _DIVIDER.fullmatch(line)
        or _END.fullmatch(line)
        or ("SEARCH" in line and _LOOSE_MARKER.fullmatch(line))
    ):
        raise MalformedEdit(
            f"line {index + 1} ({line.strip()!r}) is a block marker outside a block; each block "
            "is `<<<<<<< SEARCH`, the old lines, `=======`, the new lines, `>>>>>>> REPLACE`"
        )


def _hint(lines: list[str], i: int) -> tuple[int | None, int]:
    """The 0-based line a Roo-Code block head names (a tie-breaker only), and where its
    SEARCH lines begin."""
    start: int | None = None
    n = i
    while n < len(lines) and (found := _HINT.fullmatch(lines[n])):
        if found.group(1) == "start":
            start = max(0, int(found.group(2)) - 1)
        n += 1
    if n == i:
        return None, i
    if n < len(lines) and _HINT_END.fullmatch(lines[n]):
        n += 1
    return start, n


def _block(lines: list[str], i: int, text: str | None) -> tuple[list[str], list[str], int]:
    """SEARCH and REPLACE lines of the block whose body starts at `i`, and the line after it.

    A body with several `=======` lines (an RST underline in a docstring, say) is split at the
    one whose SEARCH part the file (`text`) has, when exactly one does, or when exactly one of
    those that do is the format's own seven `=`."""
    start = i
    stop = i
    while stop < len(lines) and not _END.fullmatch(lines[stop]):
        if _START.fullmatch(lines[stop]):
            break
        stop += 1
    dividers = [n for n in range(start, stop) if _DIVIDER.fullmatch(lines[n])]
    if not dividers:
        if stop < len(lines) or start == len(lines):
            raise MalformedEdit(
                f"the block starting at line {start} has no `=======` line between its SEARCH "
                "and REPLACE parts"
            )
        raise MalformedEdit(f"the block starting at line {start} never reaches `=======`")
    if stop < len(lines) and _START.fullmatch(lines[stop]):
        raise MalformedEdit(
            f"the block starting at line {start} is not closed with `>>>>>>> REPLACE` before "
            "the next block starts"
        )
    divider = _divider(lines, start, dividers, text)
    if stop == len(lines) and _inside_fence(lines, start):
        raise MalformedEdit(
            f"the block starting at line {start} is not closed with `>>>>>>> REPLACE`"
        )
    return lines[start:divider], lines[divider + 1 : stop], stop + 1


def _divider(lines: list[str], start: int, dividers: list[int], text: str | None) -> int:
    if len(dividers) == 1:
        return dividers[0]
    if text is not None:
        # Whitespace aside, as the SEARCH part may be matched with it tolerated.
        body = "\n" + "\n".join(line.strip() for line in text.splitlines()) + "\n"
        found = [
            d
            for d in dividers
            if "\n" + "\n".join(line.strip() for line in lines[start:d]) + "\n" in body
        ]
        canonical = [d for d in found if lines[d].strip() == "======="]
        if len(found) == 1 or len(canonical) == 1:
            return found[0] if len(found) == 1 else canonical[0]
    raise MalformedEdit(
        f"the block starting at line {start} has {len(dividers)} `=======` lines, and the file "
        "does not say which one ends the SEARCH part; split the change into blocks that each "
        "contain one"
    )


def _inside_fence(lines: list[str], index: int) -> bool:
    # A block cut off at the very end of plain text is a stream that ended; inside an open
    # code fence it is a block the model never finished.
    return sum(1 for line in lines[:index] if _FENCE.fullmatch(line)) % 2 == 1


def _path_above(lines: list[str], since: int, at: int, files: Mapping[str, str]) -> str | None:
    for n in range(at - 1, since - 1, -1):
        raw = lines[n].strip()
        if not raw or _FENCE.fullmatch(raw):
            continue
        name = raw.strip("`*#: ").removeprefix("File").strip("`*#: ")
        if name in files or _looks_like_path(name):
            return name
        return None
    return None


def _looks_like_path(name: str) -> bool:
    return bool(name) and not any(c.isspace() for c in name) and any(c.isalnum() for c in name)


def _only_file(files: Mapping[str, str], index: int) -> str:
    if len(files) == 1:
        return next(iter(files))
    raise MalformedEdit(f"the block at line {index + 1} does not say which file it changes")


def _step(
    path: str,
    search: list[str],
    replace: list[str],
    files: Mapping[str, str],
    hint: int | None = None,
) -> Step:
    if not any(line.strip() for line in search):
        if path in files and files[path].strip():
            raise MalformedEdit(
                f"the SEARCH part for {path} is empty, but the file is not; give the lines to "
                "replace",
                path=path,
            )
        content = "".join(line + "\n" for line in replace)
        return Create(path=path, content=content, overwrite=True)
    return Update(path=path, hunk=Hunk(old=tuple(search), new=tuple(replace), hint=hint))
