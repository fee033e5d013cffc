"""ripgrep's plain output read into matches, and the matches rendered for the model.

Pure functions over bytes and values; running ripgrep is `kestrel.tools.search`'s part.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

MAX_LINE_CHARS = 500
"""Matched lines longer than this are shown as a window around the match."""

GREP_OUTPUT_FLAGS = ("--heading", "--null", "--with-filename", "--line-number", "--column")
"""ripgrep's plain output, one block per file: `path NUL` then `line:column:text` for each
matching line and `line-text` for context lines, blocks separated by an empty line. It is
cheaper to print and to parse than `--json`, which also spells out every submatch."""

_MATCH_AFTER_NEWLINE = re.compile(rb"\n\d+:")
_LINE = re.compile(rb"(\d+)(?::(\d+):|-)")
_STOPPED = b": WARNING: stopped searching binary file after match"
_BINARY = re.compile(
    rb'(?P<path>.*): binary file matches \(found "\\0" byte around offset \d+\)', re.DOTALL
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepLine:
    """One line of a file, as ripgrep reported it."""

    line_number: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepMatch:
    """A matching line with the context lines ripgrep gave around it."""

    path: str
    line_number: int
    text: str
    before: tuple[GrepLine, ...] = ()
    after: tuple[GrepLine, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepReport:
    """The matches kept, how many matching lines and files there were in all, and the binary
    files that matched (ripgrep names them without showing their lines; not counted as files)."""

    matches: tuple[GrepMatch, ...]
    total_matches: int
    total_files: int
    binary_files: tuple[str, ...] = ()


@dataclass(slots=True)
class _Building:
    path: str
    line: GrepLine
    before: list[GrepLine]
    after: list[GrepLine] = field(default_factory=list)


class GrepCollector:
    """Turns ripgrep's `GREP_OUTPUT_FLAGS` output into the first `limit` matches in path order.

    ripgrep searches files in parallel and prints each file's block whole, in no set order. Each
    block is only split off and counted here; the lines are read only for the blocks that come
    first by path, and blocks that can no longer be among them are dropped as output arrives.
    """

    def __init__(self, *, context: int, limit: int) -> None:
        self._context = context
        self._limit = limit
        self._buffer = bytearray()
        self._broken = b""
        self._blocks: list[tuple[bytes, bytes]] = []
        self._cutoff: bytes | None = None
        """Once `limit` blocks are kept, blocks whose path sorts after this one are not."""
        self._total = 0
        self._files = 0
        self._binary: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        """Take in the next piece of one ripgrep run's output (cut anywhere)."""
        seen = len(self._buffer)
        self._buffer += chunk
        cut = self._buffer.rfind(b"\n\n", max(0, seen - 1))
        if cut >= 0:
            self._take(bytes(self._buffer[:cut]))
            del self._buffer[: cut + 2]

    def end_run(self) -> None:
        """Close the current ripgrep run: what is left of its output is a whole block."""
        self._take(bytes(self._buffer).removesuffix(b"\n"))
        self._buffer.clear()
        self._broken = b""

    def _take(self, whole_blocks: bytes) -> None:
        for piece in whole_blocks.split(b"\n\n"):
            if self._broken:
                piece, self._broken = self._broken + b"\n\n" + piece, b""
            heading, found, body = piece.partition(b"\0")
            if found:
                self._files += 1
                self._total += self._count_matches(heading, body)
                path = heading.removeprefix(b"./")
                if self._cutoff is None or path < self._cutoff:
                    self._blocks.append((path, body))
            elif binary := _BINARY.fullmatch(piece):
                self._binary.append(binary["path"].removeprefix(b"./"))
            elif piece:
                # A path with an empty line in its name: the rest of the block comes next.
                self._broken = piece
        if len(self._blocks) > 2 * self._limit + 64:
            # Every block has a match, so the first `limit` blocks by path hold all that is shown.
            self._blocks.sort()
            del self._blocks[self._limit :]
            self._cutoff = self._blocks[-1][0]

    def _count_matches(self, heading: bytes, body: bytes) -> int:
        if self._context:
            starts = _LINE.match(body)
            first = starts is not None and starts[2] is not None
            return first + len(_MATCH_AFTER_NEWLINE.findall(body))
        # Without context every line is a match, bar a last one saying the file turned binary.
        last = body.rfind(b"\n") + 1
        stopped = body.startswith(heading + _STOPPED, last)
        return body.count(b"\n") + (last < len(body)) - stopped

    def report(self) -> GrepReport:
        """Everything gathered so far (the current run is taken to have ended)."""
        self.end_run()
        kept: list[_Building] = []
        self._blocks.sort()
        for path, body in self._blocks:
            if len(kept) >= self._limit:
                break
            self._read_block(path.decode("utf-8", errors="replace"), body, kept)
        matches = tuple(
            GrepMatch(
                path=b.path,
                line_number=b.line.line_number,
                text=b.line.text,
                before=tuple(b.before),
                after=tuple(b.after),
            )
            for b in kept
        )
        binary = tuple(sorted(p.decode("utf-8", errors="replace") for p in self._binary))
        return GrepReport(
            matches=matches,
            total_matches=self._total,
            total_files=self._files,
            binary_files=binary,
        )

    def _read_block(self, path: str, body: bytes, kept: list[_Building]) -> None:
        pending: list[GrepLine] = []
        last: _Building | None = None
        for raw in body.split(b"\n"):
            parsed = _LINE.match(raw)
            if parsed is None:  # `--` between groups of lines, or a note about binary data
                continue
            number = int(parsed[1])
            text = raw[parsed.end() :]
            if parsed[2] is None:
                line = GrepLine(line_number=number, text=clip_line(_decode(text), 0))
                if last is not None and number - last.line.line_number <= self._context:
                    last.after.append(line)
                pending.append(line)
                continue
            if len(kept) >= self._limit:
                return
            line = GrepLine(line_number=number, text=_clip_match(text, int(parsed[2])))
            before = [p for p in pending if number - p.line_number <= self._context]
            last = _Building(path=path, line=line, before=before)
            kept.append(last)
            pending = []


def _clip_match(raw: bytes, column: int) -> str:
    text = _decode(raw)
    if len(text) <= MAX_LINE_CHARS:
        return text
    # ripgrep gives the match's byte column; the window around it is cut in characters.
    return clip_line(text, len(raw[: column - 1].decode("utf-8", errors="ignore")))


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")


def clip_line(text: str, focus: int, width: int = MAX_LINE_CHARS) -> str:
    """`text` if short, else a `width`-character window starting a little before `focus`."""
    if len(text) <= width:
        return text
    start = max(0, min(focus - width // 5, len(text) - width))
    end = start + width
    head = f"[... {start} chars] " if start else ""
    tail = f" [... {len(text) - end} more chars]" if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}"


def render_report(report: GrepReport) -> str:
    """Matches as `path:line: text` (context lines as `path:line- text`), grouped by file."""
    blocks: list[str] = []
    current_path: str | None = None
    previous = 0
    for path, number, text, is_match in _ordered_lines(report.matches):
        if path != current_path:
            if current_path is not None:
                blocks.append("")
            current_path, previous = path, 0
        elif number > previous + 1:
            blocks.append("--")
        blocks.append(f"{path}:{number}{':' if is_match else '-'} {text}")
        previous = number
    return "\n".join(blocks)


def _ordered_lines(matches: Sequence[GrepMatch]) -> Iterator[tuple[str, int, str, bool]]:
    # Context shared by neighbouring matches is printed once, in line order, per file.
    by_path: dict[str, dict[int, tuple[str, bool]]] = {}
    for match in matches:
        lines = by_path.setdefault(match.path, {})
        for ctx in (*match.before, *match.after):
            lines.setdefault(ctx.line_number, (ctx.text, False))
        lines[match.line_number] = (match.text, True)
    for path, lines in by_path.items():
        for number in sorted(lines):
            text, is_match = lines[number]
            yield path, number, text, is_match
