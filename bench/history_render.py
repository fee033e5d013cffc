"""Reading a repository's changes, cutting them into blocks, and writing those as the edit text
of each format with the mistakes models make; the recipe is in `bench/history_cases.py`."""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

Op = tuple[str, str]
"""(tag, line): ' ' kept, '-' removed (or only in the old text), '+' added (or only in the new)."""
_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class Git:
    """Commands and blobs of one repository (`git cat-file --batch` kept open)."""

    def __init__(self, repo: Path) -> None:
        self.dir = repo / ".git" if (repo / ".git").exists() else repo
        self._batch = subprocess.Popen(
            ["git", f"--git-dir={self.dir}", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, *args: str) -> str:
        """A git command's output (empty when it fails)."""
        command = ["git", f"--git-dir={self.dir}", "--no-pager", *args]
        done = subprocess.run(command, capture_output=True, check=False)
        return done.stdout.decode("utf-8", "replace")

    def text(self, spec: str) -> str | None:
        """A blob as UTF-8 text (None when missing or not UTF-8)."""
        assert self._batch.stdin and self._batch.stdout
        self._batch.stdin.write(spec.encode() + b"\n")
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            return None
        data = self._batch.stdout.read(int(header[2]) + 1)[:-1]
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def close(self) -> None:
        """End the blob reader."""
        if self._batch.stdin:
            self._batch.stdin.close()
        self._batch.wait()


@dataclass(frozen=True)
class Block:
    """One hunk: 0-based first line in the old and in the new file, and its ops."""

    start: int
    nstart: int
    ops: tuple[Op, ...]

    @property
    def old(self) -> list[str]:
        return [text for tag, text in self.ops if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [text for tag, text in self.ops if tag != "-"]

    @property
    def end(self) -> int:
        return self.start + len(self.old)


def lines_of(text: str) -> list[str]:
    """The lines of `text` without their newlines (a final newline ends the last line)."""
    body = text.split("\n")
    if body and body[-1] == "":
        body.pop()
    return body


def join(lines: Sequence[str], eol: str = "\n") -> str:
    """The text of `lines`, each ended by `eol`."""
    return "".join(line + eol for line in lines)


def parse_hunks(diff: str, before: Sequence[str]) -> list[Block] | None:
    """`git diff` hunks as blocks; None when a hunk's old lines are not `before`'s there."""
    out: list[Block] = []
    for line in diff.split("\n"):
        found = _HEADER.match(line)
        if found:
            a, c = int(found.group(1)), int(found.group(3))
            out.append(Block(a - 1 if found.group(2) != "0" else a, c - 1, ()))
        elif out and line[:1] in (" ", "-", "+"):  # (the ---/+++ lines come before any hunk)
            last = out[-1]
            out[-1] = replace(last, ops=(*last.ops, (line[0], line[1:])))
    ok = all(list(before[b.start : b.end]) == b.old for b in out)
    return out if out and ok else None


def context(lines: Sequence[str]) -> list[Op]:
    """`lines` as kept lines."""
    return [(" ", line) for line in lines]


def _span(before: Sequence[str], start: int, end: int, members: Sequence[Block]) -> Block:
    """One block over old lines [start, end) holding the changes of `members`."""
    ops: list[Op] = []
    pos = start
    for member in members:
        ops += context(before[pos : member.start]) + list(member.ops)
        pos = member.end
    ops += context(before[pos:end])
    return Block(start, members[0].nstart - (members[0].start - start), tuple(ops))


def applied(before: Sequence[str], blocks: Sequence[Block]) -> list[str]:
    """`before` with `blocks` (in order, not overlapping) applied."""
    out: list[str] = []
    pos = 0
    for block in blocks:
        out += list(before[pos : block.start]) + block.new
        pos = block.end
    return out + list(before[pos:])


def unique(needle: Sequence[str], lines: Sequence[str]) -> bool:
    """Whether `needle`'s text occurs once in `lines`' text, at a line start or not."""
    text, part = join(lines), "\n".join(needle)
    first = text.find(part)
    return first >= 0 and text.find(part, first + 1) < 0


def widen(before: Sequence[str], hunks: Sequence[Block]) -> list[Block]:
    """Each hunk in turn grows one line of context on both sides until its old text is unique in
    the file as the hunks before it left it; a hunk that reaches the one before it merges."""
    spans: list[tuple[int, int, list[Block]]] = []
    for hunk in hunks:
        start, end, members = hunk.start, hunk.end, [hunk]
        while True:
            if spans and start < spans[-1][1]:
                was, was_end, was_members = spans.pop()
                start, end, members = was, max(end, was_end), was_members + members
            now = applied(before, [_span(before, *span) for span in spans])
            whole = start == 0 and end == len(before)
            if whole or unique(before[start:end], now):
                break
            start, end = max(0, start - 1), min(len(before), end + 1)
        spans.append((start, end, members))
    return [_span(before, *span) for span in spans]


def occurrences(lines: Sequence[str], needle: Sequence[str]) -> list[int]:
    """Where `needle` occurs in `lines` as whole lines."""
    n, want = len(needle), list(needle)
    return [i for i in range(len(lines) - n + 1)
            if n and lines[i] == want[0] and list(lines[i : i + n]) == want]  # fmt: skip


def change_groups(blocks: Sequence[Block]) -> list[Block]:
    """Each run of changed lines without context (as `git diff -U0` shows them), placed as if it
    were the only change."""
    out = []
    for block in blocks:
        pos, run = block.start, []
        for tag, text in (*block.ops, (" ", "")):
            if tag != " ":
                run.append((tag, text))
                pos += tag == "-"
                continue
            if run:
                removed = sum(1 for t, _ in run if t == "-")
                out.append(Block(pos - removed, pos - removed, tuple(run)))
                run = []
            pos += 1
    return out


def render(
    fmt: str, path: str, blocks: Sequence[Block], shift: int = 0
) -> str | list[dict[str, str]]:
    """The edit in `fmt`; `shift` moves udiff line numbers (stale line numbers)."""
    if fmt == "str_replace":
        return [
            {
                "command": "str_replace",
                "path": path,
                "old_str": "\n".join(b.old),
                "new_str": "\n".join(b.new),
            }
            for b in blocks
        ]
    if fmt == "search_replace":
        return "\n".join(
            f"{path}\n<<<<<<< SEARCH\n{join(b.old)}=======\n{join(b.new)}>>>>>>> REPLACE\n"
            for b in blocks
        )
    if fmt == "udiff":
        out = [f"--- a/{path}", f"+++ b/{path}"]
        for b in blocks:
            old_n, new_n = len(b.old), len(b.new)
            old_at = b.start + shift + (1 if old_n else 0)
            new_at = b.nstart + shift + (1 if new_n else 0)
            out.append(f"@@ -{old_at},{old_n} +{new_at},{new_n} @@")
            out.extend(tag + text for tag, text in b.ops)
        return join(out)
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    for b in blocks:
        out.append("@@")
        out.extend(tag + text for tag, text in b.ops)
    out.append("*** End Patch")
    return join(out)


def indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def tabs_for(line: str) -> str:
    """Leading spaces as tabs, four to a tab (the rest stay spaces)."""
    n = len(line) - len(line.lstrip(" "))
    return "\t" * (n // 4) + " " * (n % 4) + line[n:]


def map_lines(blocks: Sequence[Block], change: Callable[[str], str]) -> list[Block]:
    """Every line of every block through `change` (blank lines too)."""
    return [replace(b, ops=tuple((t, change(x)) for t, x in b.ops)) for b in blocks]


def shifted(blocks: Sequence[Block], by: int) -> list[Block]:
    """Every non-blank edit line moved `by` columns (the caller checks a left move fits)."""

    def move(line: str) -> str:
        if not line.strip():
            return line
        return " " * by + line if by > 0 else line[-by:]

    return map_lines(blocks, move)


def edit_trailing(blocks: Sequence[Block], rng: random.Random, old_only: bool) -> list[Block]:
    """Trailing blanks after about half the edit's non-blank old-side lines (at least one); with
    `old_only` (texts given apart) a kept line changes in the old text only."""
    spots = [(k, n) for k, b in enumerate(blocks) for n, (t, x) in enumerate(b.ops)
             if t != "+" and x.strip()]  # fmt: skip
    picked = {spot for spot in spots if rng.random() < 0.5} or {rng.choice(spots)}
    out = []
    for k, b in enumerate(blocks):
        ops: list[Op] = []
        for n, (tag, text) in enumerate(b.ops):
            if (k, n) not in picked:
                ops.append((tag, text))
                continue
            spaced = text + rng.choice((" ", "  ", "    ", "\t"))
            ops += [("-", spaced), ("+", text)] if old_only and tag == " " else [(tag, spaced)]
        out.append(replace(b, ops=tuple(ops)))
    return out


def elide(
    before: Sequence[str], blocks: Sequence[Block], rng: random.Random, marker: str, count: int
) -> list[Block] | None:
    """`count` kept lines inside one block, not all blank, written as one marker line indented as
    the first non-blank of them. Only where the nearest old-side lines around them are not blank,
    and the nearest reading of the marker (the fewest lines, one or more) finds only them."""
    spots = []
    for k, b in enumerate(blocks):
        old_at = [n for n, (t, _) in enumerate(b.ops) if t != "+"]
        now = applied(before, blocks[:k])
        for n in range(1, len(b.ops) - count):
            run, head = b.ops[n : n + count], [m for m in old_at if m < n]
            tail = [m for m in old_at if m >= n + count]
            if any(t != " " for t, _ in run) or not any(x.strip() for _, x in run):
                continue
            if head and tail and b.ops[head[-1]][1].strip() and b.ops[tail[0]][1].strip():
                prefix, suffix = [b.ops[m][1] for m in head], [b.ops[m][1] for m in tail]
                spots += [(k, n)] if nearest_gap(now, prefix, suffix) == [count] else []
    if not spots:
        return None
    k, n = rng.choice(spots)
    ops = blocks[k].ops
    lead = indent(next(x for _, x in ops[n : n + count] if x.strip()))
    elided = replace(blocks[k], ops=(*ops[:n], (" ", lead + marker), *ops[n + count :]))
    return [*blocks[:k], elided, *blocks[k + 1 :]]


def nearest_gap(lines: Sequence[str], prefix: Sequence[str], suffix: Sequence[str]) -> list[int]:
    """The gaps (1-60 lines) of the readings of prefix, gap, suffix in `lines` with the fewest,
    or none when readings start at two places."""
    readings = [
        (at, gap)
        for at in occurrences(lines, prefix)
        for gap in range(1, 61)
        if list(lines[at + len(prefix) + gap : at + len(prefix) + gap + len(suffix)]) == suffix
    ]
    least = min((gap for _, gap in readings), default=0)
    return [] if len({at for at, _ in readings}) > 1 else [g for _, g in readings if g == least]


def blank_added(block: Block, rng: random.Random, old_only: bool) -> Block | None:
    """A blank line between two adjacent non-blank old-side lines: in the old text only when
    texts are given apart, as a context line in a diff."""
    ops = block.ops
    spots = [n for n in range(1, len(ops)) if "+" not in (ops[n - 1][0], ops[n][0])
             and ops[n - 1][1].strip() and ops[n][1].strip()]  # fmt: skip
    if not spots:
        return None
    n = rng.choice(spots)
    return replace(block, ops=(*block.ops[:n], ("-" if old_only else " ", ""), *block.ops[n:]))


def blank_missing(
    blocks: Sequence[Block], rng: random.Random, fmt: str
) -> tuple[list[Block], bool] | None:
    """A kept blank line dropped, and whether it was a block's first or last line (then gone from
    both texts). Inside a block: after a non-blank line; for texts given apart only in a one-block
    change, and gone from the old text only; in a diff not from a run of blank lines that touches
    lines only added; never at a udiff hunk's edge."""
    apart = fmt in ("search_replace", "str_replace")
    spots = []
    for k, b in enumerate(blocks):
        for n, (tag, text) in enumerate(b.ops):
            if tag != " " or text:
                continue
            edge = n in (0, len(b.ops) - 1)
            inner_ok = n > 0 and b.ops[n - 1][1].strip() and not (apart and len(blocks) > 1)
            inner_ok = inner_ok and (apart or not _blanks_meet_added(b.ops, n))
            if (edge and fmt != "udiff") or (not edge and inner_ok):
                spots.append((k, n, edge))
    if not spots:
        return None
    k, n, edge = rng.choice(spots)
    ops = blocks[k].ops
    middle = (("+", ""),) if apart and not edge else ()
    start = blocks[k].start + (1 if n == 0 else 0)
    nstart = blocks[k].nstart + (1 if n == 0 else 0)
    cut = Block(start, nstart, (*ops[:n], *middle, *ops[n + 1 :]))
    return [*blocks[:k], cut, *blocks[k + 1 :]], edge


def _blanks_meet_added(ops: Sequence[Op], n: int) -> bool:
    """Whether the run of kept blank lines around `ops[n]` touches changes on both sides, or a
    change whose line or removed line next to it is blank, or with no removed non-blank line to
    pin it: the missing blank could then be meant to go, or new lines go on either side of it."""
    low, high = n, n
    while low > 0 and ops[low - 1] == (" ", ""):
        low -= 1
    while high + 1 < len(ops) and ops[high + 1] == (" ", ""):
        high += 1
    touched = 0
    for step, at in ((-1, low - 1), (1, high + 1)):
        group = []
        while 0 <= at < len(ops) and ops[at][0] != " ":
            group.append(ops[at])
            at += step
        removed = [text for tag, text in group if tag == "-"]  # nearest to the run first
        if group and (not any(removed) or not removed[0] or not group[0][1]):
            return True
        touched += bool(group)
    return touched == 2


def plain(text: str, blocks: Sequence[Block]) -> str | None:
    """`text` after each block's old text, unique there, is replaced by its new text."""
    for block in blocks:
        old, new = "\n".join(block.old), "\n".join(block.new)
        if text.count(old) != 1:
            return None
        text = text.replace(old, new, 1)
    return text


def fair(before: Sequence[str], blocks: Sequence[Block], changed: Sequence[Block]) -> bool:
    """Whether each changed block's old text, with each line stripped, occurs in the file as the
    blocks before it left it only at its own block's place."""
    for k, (block, mine) in enumerate(zip(blocks, changed, strict=True)):
        now = [x.strip() for x in applied(before, blocks[:k])]
        at = block.start + sum(len(b.new) - len(b.old) for b in blocks[:k])
        spots = occurrences(now, [x.strip() for x in mine.old])
        if any(not at <= spot <= at + len(block.old) - len(mine.old) for spot in spots):
            return False
    return True


def literal(text: str, blocks: Sequence[Block], expected: str) -> bool:
    """Whether replacing each block's old text by its new one as plain text, in turn, gives
    `expected`, or stops at an old text not found (a text found twice does not do)."""
    for block in blocks:
        old, new = "\n".join(block.old), "\n".join(block.new)
        found = text.count(old)
        if found != 1:
            return found == 0
        text = text.replace(old, new, 1)
    return text == expected
