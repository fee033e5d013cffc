"""Rendering one real change (a file before and after a commit) as an edit in each format, and
the mistakes models make when they write one; for `bench/history_cases.py`."""

from __future__ import annotations

import difflib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

CONTEXT = 3
Op = tuple[str, str]
"""(tag, line): ' ' kept, '-' removed, '+' added."""


@dataclass
class Block:
    """One hunk: its ops and the 0-based line of the old file where it starts."""

    start: int
    ops: list[Op]

    @property
    def old(self) -> list[str]:
        return [text for tag, text in self.ops if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [text for tag, text in self.ops if tag != "-"]


def lines_of(text: str) -> list[str]:
    body = text.split("\n")
    if body and body[-1] == "":
        body.pop()
    return body


def join(lines: Sequence[str], eol: str = "\n") -> str:
    return "".join(line + eol for line in lines)


def blocks(before: Sequence[str], after: Sequence[str]) -> list[Block]:
    """The commit's hunks with three lines of context, nearby changes merged, as git shows them."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    out = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        ops: list[Op] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                ops.extend((" ", line) for line in before[i1:i2])
                continue
            ops.extend(("-", line) for line in before[i1:i2])
            ops.extend(("+", line) for line in after[j1:j2])
        out.append(Block(group[0][1], ops))
    return out


def render(fmt: str, path: str, parts: Sequence[Block], shift: int = 0) -> object:
    """The edit in `fmt`; `shift` moves udiff line numbers (stale line numbers)."""
    if fmt == "str_replace":
        return [
            {
                "command": "str_replace",
                "path": path,
                "old_str": "\n".join(b.old),
                "new_str": "\n".join(b.new),
            }
            for b in parts
        ]
    if fmt == "search_replace":
        return "\n".join(
            f"{path}\n<<<<<<< SEARCH\n{join(b.old)}=======\n{join(b.new)}>>>>>>> REPLACE\n"
            for b in parts
        )
    if fmt == "udiff":
        out = [f"--- a/{path}", f"+++ b/{path}"]
        delta = 0
        for b in parts:
            old_n, new_n = len(b.old), len(b.new)
            start = b.start + 1 + shift
            out.append(f"@@ -{start},{old_n} +{start + delta},{new_n} @@")
            out.extend(tag + text for tag, text in b.ops)
            delta += new_n - old_n
        return join(out)
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    for b in parts:
        out.append("@@")
        out.extend(tag + text for tag, text in b.ops)
    out.append("*** End Patch")
    return join(out)


def edit_lines(edit: object) -> int:
    return len(json.dumps(edit).split("\\n")) if not isinstance(edit, str) else edit.count("\n")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def shift_indent(parts: Sequence[Block], by: int) -> list[Block] | None:
    """Every edit line moved `by` columns (None when a line cannot move left that far)."""
    out = []
    for b in parts:
        ops = []
        for tag, text in b.ops:
            if not text.strip():
                ops.append((tag, text))
            elif by > 0:
                ops.append((tag, " " * by + text))
            elif text.startswith(" " * -by):
                ops.append((tag, text[-by:]))
            else:
                return None
        out.append(Block(b.start, ops))
    return out


def tabs_for(text: str) -> str:
    """Leading runs of four spaces as tabs."""
    lead = _indent(text)
    if "\t" in lead or not lead:
        return text
    return "\t" * (len(lead) // 4) + " " * (len(lead) % 4) + text[len(lead) :]


def map_edit(parts: Sequence[Block], change, kinds: str = " -+") -> list[Block]:
    return [Block(b.start, [(t, change(x) if t in kinds else x) for t, x in b.ops]) for b in parts]


def context_indexes(parts: Sequence[Block]) -> list[tuple[int, int]]:
    """(block, op) of context lines with context on both sides (not a block's edge)."""
    found = []
    for k, b in enumerate(parts):
        for n in range(1, len(b.ops) - 1):
            if b.ops[n][0] == " " and b.ops[n - 1][0] == " " and b.ops[n + 1][0] == " ":
                found.append((k, n))
    return found


def elide(
    parts: Sequence[Block], rng: random.Random, marker: str, count: int
) -> list[Block] | None:
    """`count` inner context lines of one block replaced by one marker line (a gap)."""
    for k, b in enumerate(parts):
        runs = [
            n
            for n in range(1, len(b.ops) - count)
            if all(b.ops[m][0] == " " and b.ops[m][1].strip() for m in range(n - 1, n + count + 1))
        ]
        if runs:
            n = rng.choice(runs)
            lead = _indent(b.ops[n][1])
            ops = [*b.ops[:n], (" ", lead + marker), *b.ops[n + count :]]
            return [*parts[:k], Block(b.start, ops), *parts[k + 1 :]]
    return None


def blank_change(
    parts: Sequence[Block], rng: random.Random, add: bool, old_only: bool
) -> list[Block] | None:
    """A blank context line added to (or a blank one dropped from) one block. With `old_only`
    (formats that give old and new text apart) only the model's copy of the old text changes."""
    spots = []
    for k, b in enumerate(parts):
        for n, (tag, text) in enumerate(b.ops):
            # Only between non-blank lines: at a run of blanks (or an edge) the changed text
            # would be, literally, another exact edit (a substring starting mid-run).
            prev = b.ops[n - 1][1].strip() if n > 0 else ""
            after = b.ops[n + 1][1].strip() if n + 1 < len(b.ops) else ""
            if add and tag == " " and text.strip() and prev:
                spots.append((k, n))
            if not add and tag == " " and not text.strip() and prev and after:
                spots.append((k, n))
    if not spots:
        return None
    k, n = rng.choice(spots)
    b = parts[k]
    if add:
        ops = [*b.ops[:n], ("-" if old_only else " ", ""), *b.ops[n:]]
    elif old_only and 0 < n < len(b.ops) - 1:
        ops = [*b.ops[:n], ("+", ""), *b.ops[n + 1 :]]  # At an edge: less context, both sides.
    else:
        ops = [*b.ops[:n], *b.ops[n + 1 :]]
    return [*parts[:k], Block(b.start, ops), *parts[k + 1 :]]


_WORD = re.compile(r"[A-Za-z_]\w{3,}")


def no_match(parts: Sequence[Block], text: str) -> list[Block] | None:
    """A removed line changed into one the file does not have (a stale or invented line)."""
    for k, b in enumerate(parts):
        for n, (tag, line) in enumerate(b.ops):
            words = _WORD.findall(line)
            if tag != "-" or not words:
                continue
            changed = line.replace(words[-1], words[-1] + "_renamed", 1)
            if changed.strip() and changed.strip() not in text:
                ops = [*b.ops[:n], (tag, changed), *b.ops[n + 1 :]]
                return [*parts[:k], Block(b.start, ops), *parts[k + 1 :]]
    return None
