"""The V4A patch envelope: `*** Begin Patch`, Add/Update/Delete File sections, `*** End Patch`."""

from __future__ import annotations

import re

from kestrel.edits.doc import split_edit_lines
from kestrel.edits.errors import MalformedEdit
from kestrel.edits.model import Create, Delete, Move, Step, Tag, Update, hunk_from_ops

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
UPDATE = "*** Update File: "
DELETE = "*** Delete File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"
_HEADER = re.compile(r"\*\*\*\s*(Add|Update|Delete) File\s*:\s*(\S.*?)\s*")
_MOVE = re.compile(r"\*\*\*\s*Move to\s*:\s*(\S.*?)\s*")


def header(line: str) -> tuple[str, str] | None:
    """(`Add` | `Update` | `Delete`, path) for a file header, padded or trimmed as models
    write them (`  *** Update File:path  `); `None` for any other line."""
    found = _HEADER.fullmatch(line.strip())
    return (found.group(1), found.group(2)) if found else None


def parse_apply_patch(text: str) -> list[Step]:
    """Steps for every file section; the envelope lines themselves are optional."""
    lines = _body(split_edit_lines(text))
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        found = header(lines[i])
        if found is None:
            if lines[i].strip():
                raise MalformedEdit(
                    f"unexpected line {i + 1} in the patch: {lines[i][:80]!r}; each section "
                    f"starts with `{ADD}`, `{UPDATE}` or `{DELETE}`"
                )
            i += 1
            continue
        kind, path = found
        if kind == "Add":
            i = _add(lines, i + 1, path, steps)
        elif kind == "Delete":
            steps.append(Delete(path=path))
            i += 1
        else:
            i = _update(lines, i + 1, path, steps)
    if not steps:
        raise MalformedEdit(f"the patch has no file sections; wrap them in `{BEGIN}` ... `{END}`")
    return steps


def _body(lines: list[str]) -> list[str]:
    """The lines between the envelope markers (fences, heredocs and chatter around it dropped)."""
    begin = next((n for n, line in enumerate(lines) if line.strip() == BEGIN), None)
    if begin is None:
        first = next((n for n, line in enumerate(lines) if header(line)), None)
        if first is None:
            raise MalformedEdit(f"no `{BEGIN}` line: this is not a V4A patch")
        begin = first - 1
    end = next((n for n in range(len(lines) - 1, begin, -1) if lines[n].strip() == END), len(lines))
    return lines[begin + 1 : end]


def _add(lines: list[str], i: int, path: str, steps: list[Step]) -> int:
    content: list[str] = []
    while i < len(lines) and header(lines[i]) is None:
        if not lines[i].startswith("+"):
            raise MalformedEdit(
                f"line {i + 1} of the patch: every line of an added file starts with `+`",
                path=path,
            )
        content.append(lines[i][1:])
        i += 1
    steps.append(Create(path=path, content="".join(line + "\n" for line in content)))
    return i


def _update(lines: list[str], i: int, path: str, steps: list[Step]) -> int:
    updates: list[Step] = []
    move_to: str | None = None
    moved = _MOVE.fullmatch(lines[i].strip()) if i < len(lines) else None
    if moved:
        move_to = moved.group(1)
        i += 1
    anchor: str | None = None
    ops: list[tuple[Tag, str]] = []

    def flush(at_eof: bool = False) -> None:
        if any(tag != " " for tag, _ in ops):
            # Added lines with no context and no `@@` line go at the end of the file, as the
            # format's reference implementation puts them.
            bare = anchor is None and all(tag == "+" for tag, _ in ops)
            hunk = hunk_from_ops(ops, anchor=anchor, at_eof=at_eof or bare)
            updates.append(Update(path=path, hunk=hunk, ends_with_newline=True, in_order=True))
        ops.clear()

    while i < len(lines) and header(lines[i]) is None:
        line = lines[i]
        if line.strip() == EOF_MARK:
            flush(at_eof=True)
        elif line.startswith("@@"):
            flush()
            anchor = line[2:].strip() or None
        elif line == "" or line[0] in " -+":
            tag: Tag = " " if line == "" else line[0]  # type: ignore[assignment]
            ops.append((tag, line[1:]))
        else:
            raise MalformedEdit(
                f"line {i + 1} of the patch starts with {line[:1]!r}; lines of an update start "
                "with a space (kept), `-` (removed) or `+` (added)",
                path=path,
            )
        i += 1
    flush()
    if not updates and move_to is None:
        raise MalformedEdit(f"the update of {path} changes nothing", path=path)
    steps.extend(updates)
    if move_to is not None:
        steps.append(Move(path=path, to=move_to))
    return i
