"""Unified diffs (`---`/`+++`/`@@ -a,b +c,d @@`); line numbers only break ties between matches."""

from __future__ import annotations

import re

from kestrel.edits.doc import split_edit_lines
from kestrel.edits.errors import MalformedEdit
from kestrel.edits.model import Create, Delete, Step, Tag, Update, hunk_from_ops

_HUNK = re.compile(r"@@+\s*(?:-(\d+)(?:,\d+)?\s*\+\d+(?:,\d+)?)?.*")
_FENCE = re.compile(r"(`{3,}|~{3,})[\w.+#-]*\s*")


def _header_path(line: str) -> str | None:
    raw = line[4:].split("\t", 1)[0].strip()
    if raw == "/dev/null":
        return None
    if raw.startswith(("a/", "b/")):
        raw = raw[2:]
    return raw


def parse_udiff(text: str) -> list[Step]:
    """Steps from every hunk of every file in the diff."""
    lines = [line for line in split_edit_lines(text) if not _FENCE.fullmatch(line)]
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            i = _file(lines, i, steps)
        else:
            i += 1
    if not steps:
        raise MalformedEdit(
            "no file headers found; a unified diff starts each file with `--- a/path` and "
            "`+++ b/path` lines, then `@@ ... @@` hunks"
        )
    return steps


def _file(lines: list[str], i: int, steps: list[Step]) -> int:
    old_path, new_path = _header_path(lines[i]), _header_path(lines[i + 1])
    i += 2
    hunks: list[tuple[int | None, list[tuple[Tag, str]]]] = []
    while i < len(lines) and not _is_header(lines, i):
        head = _HUNK.fullmatch(lines[i]) if lines[i].startswith("@@") else None
        if head is None:
            i += 1
            continue
        hint = int(head.group(1)) - 1 if head.group(1) else None
        ops, i = _hunk_lines(lines, i + 1)
        hunks.append((None if hint is None else max(hint, 0), ops))
    path = new_path or old_path
    if path is None:
        raise MalformedEdit("a file header names /dev/null on both sides")
    if old_path is None:
        content = "".join(text + "\n" for hunk in hunks for tag, text in hunk[1] if tag != "-")
        steps.append(Create(path=path, content=content))
    elif new_path is None:
        steps.append(Delete(path=old_path))
    else:
        if not hunks:
            raise MalformedEdit(f"the diff for {path} has no `@@` hunks", path=path)
        steps.extend(Update(path=path, hunk=hunk_from_ops(ops, hint=hint)) for hint, ops in hunks)
    return i


def _is_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _hunk_lines(lines: list[str], i: int) -> tuple[list[tuple[Tag, str]], int]:
    ops: list[tuple[Tag, str]] = []
    while i < len(lines) and not _is_header(lines, i) and not lines[i].startswith("@@"):
        line = lines[i]
        if line == "":
            ops.append((" ", ""))  # a blank context line whose leading space was lost
        elif line[0] in " -+":
            ops.append((line[0], line[1:]))  # type: ignore[arg-type]
        elif not line.startswith("\\"):
            break
        i += 1
    while ops and ops[-1] == (" ", ""):
        ops.pop()
    return ops, i
