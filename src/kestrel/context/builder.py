"""Context packs: the code, outlines and paths a model sees for a task, inside a token budget.

Files in play (read or edited in the session) come first, then the files the engine ranks for the
task. Each file is shown by the code of its best-matching definitions if that fits, else by its
outline, else it is left out; the note at the end counts what was shortened or left out and says
how to get it, so a cut pack never looks complete. Each file is read once, at the edge, and its
hash checked against what the index served: a file that changed is re-indexed and the search run
again, so the pack never shows line numbers from an older text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from kestrel.context.budget import estimate_tokens, max_chars
from kestrel.context.engine import ContextEngine
from kestrel.context.inventory import MAX_RANKED_BYTES, classify, hash_file
from kestrel.context.model import FileSymbols, SearchResult, SymbolHit
from kestrel.context.symbols import outline

CONTEXT_LINES = 2
"""Lines shown either side of a definition: its decorators, a comment, the next line."""
HEAD_LINES = 40
"""How much of a file without definitions (a README, a script) is shown."""
IN_PLAY = "read or edited in this session"
_HINT = "Get them with read_file(path), outline(path) or search_code(query)."
_SEP = "\n\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class PackItem:
    """One piece of a pack: a range of code, a file's outline, or a bare path."""

    path: str
    content_hash: str
    kind: Literal["code", "outline", "path"]
    line: int
    end_line: int
    text: str
    tokens: int
    reason: str

    def render(self) -> str:
        """The item as the model sees it: a header line, then numbered code or the outline."""
        if self.kind == "path":
            return f"{self.path} ({self.reason})"
        if self.kind == "outline":
            return f"{self.path} (outline; {self.reason})\n{self.text}"
        width = len(str(self.end_line))
        numbered = (
            f"{n:>{width}}| {src}" for n, src in enumerate(self.text.split("\n"), start=self.line)
        )
        return f"{self.path}:{self.line}-{self.end_line} ({self.reason})\n" + "\n".join(numbered)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPack:
    """The items chosen for a task, best first, with a note on everything that was cut."""

    items: tuple[PackItem, ...]
    tokens: int
    budget: int
    left_out: tuple[str, ...]
    note: str
    stale_caught: int = 0
    vanished: tuple[str, ...] = ()
    pending: int = 0
    """Files still being indexed in the background when the pack was built: not searched."""

    def render(self) -> str:
        """The text the model sees: the items, then the note."""
        return _SEP.join(
            [*(item.render() for item in self.items), *([self.note] * bool(self.note))]
        )


@dataclass(frozen=True, slots=True)
class Source:
    """A file as read once from disk: its content hash, and its text when it may be shown."""

    content_hash: str
    text: str | None


Reader = Callable[[Path, str], Source | None]
"""Reads one repository path under a root; None when the file is gone."""


def read_source(root: Path, path: str) -> Source | None:
    """The file's hash and UTF-8 text; no text for binary, huge or undecodable files."""
    file = root / path
    try:
        if file.stat().st_size > MAX_RANKED_BYTES:
            return Source(hash_file(file), None)
        data = file.read_bytes()
    except OSError:
        return None
    judged = classify(path, data)
    if judged.kind in ("binary", "huge"):
        return Source(judged.content_hash, None)
    try:
        return Source(judged.content_hash, data.decode("utf-8"))
    except UnicodeDecodeError:
        return Source(judged.content_hash, None)


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: str
    reason: str
    hits: tuple[SymbolHit, ...]
    symbols: FileSymbols | None
    served_hash: str | None


def build_context_pack(
    engine: ContextEngine,
    task: str,
    *,
    budget_tokens: int,
    in_play: Sequence[str] = (),
    k: int = 10,
    read: Reader = read_source,
) -> ContextPack:
    """Files in play, then the files ranked for `task`, as code, outlines or paths in budget."""
    before = engine.stale_caught
    sources: dict[str, Source | None] = {}
    result = engine.search(task, k)
    candidates = _candidates(engine, result, in_play)
    for c in candidates:
        sources[c.path] = read(engine.root, c.path)
    # Behind: served from older bytes, missing from the index, or gone from disk since indexing.
    behind = [c for c in candidates if _hash(sources[c.path]) != c.served_hash]
    caught = sum(1 for c in behind if c.served_hash is not None and sources[c.path] is not None)
    if behind:
        # The index was behind the disk: re-index those files and rank once more.
        engine.refresh_paths(c.path for c in behind)
        result = engine.search(task, k)
        candidates = _candidates(engine, result, in_play)
        for c in candidates:
            if c.path not in sources:
                sources[c.path] = read(engine.root, c.path)
    caught += engine.stale_caught - before
    vanished = tuple(path for path, source in sources.items() if source is None)
    present = [(c, s) for c in candidates if (s := sources[c.path]) is not None]
    return _pack(present, vanished, budget_tokens, caught, result.pending)


def _candidates(
    engine: ContextEngine, result: SearchResult, in_play: Sequence[str]
) -> list[_Candidate]:
    ranked = {hit.path: (rank, hit) for rank, hit in enumerate(result.files, start=1)}
    found: list[_Candidate] = []
    for path in dict.fromkeys([*in_play, *ranked]):
        record = engine.record(path)
        symbols = record.symbols if record is not None else None
        if path in ranked:
            rank, hit = ranked[path]
            reason = f"ranked {rank} for the task"
            if path in in_play:
                reason = f"{IN_PLAY}; {reason}"
            found.append(_Candidate(path, reason, hit.symbols, symbols, hit.content_hash))
        else:
            hits = tuple(h for h in result.symbols if h.path == path)
            served = record.content_hash if record is not None else None
            found.append(_Candidate(path, IN_PLAY, hits, symbols, served))
    return found


def _hash(source: Source | None) -> str | None:
    return source.content_hash if source is not None else None


@dataclass(frozen=True, slots=True)
class _Option:
    items: tuple[PackItem, ...]
    hidden: int  # matching definitions this option does not show as code


def _pack(
    present: Sequence[tuple[_Candidate, Source]],
    vanished: tuple[str, ...],
    budget_tokens: int,
    stale_caught: int,
    pending: int = 0,
) -> ContextPack:
    """Fill the budget with each file's richest option that fits; the rest is noted."""
    limit = max_chars(budget_tokens)
    total_hits = sum(len(c.hits) for c, _ in present)
    n = len(present)
    # Room for the note is kept first, as long as it could be: every file cut, every hit hidden.
    longest = _notes(n, n, n, total_hits, vanished, pending)
    reserve = next((len(v) for v in longest if len(v) <= limit), 0)
    items: list[PackItem] = []
    left_out: list[str] = []
    used = outlines = hidden = 0
    for candidate, source in present:
        for option in _options(candidate, source):
            size = sum(len(item.render()) + len(_SEP) for item in option.items)
            if _length(used + size, reserve) <= limit:
                items.extend(option.items)
                used += size
                hidden += option.hidden
                outlines += option.items[0].kind == "outline"
                break
        else:
            left_out.append(candidate.path)
            hidden += len(candidate.hits)
    notes = _notes(n, outlines, len(left_out), hidden, vanished, pending)
    note = next((v for v in notes if _length(used, len(v)) <= limit), "")
    if note and left_out and note == notes[0]:
        note = _with_listing(note, left_out, limit - _length(used, len(note)))
    pack = ContextPack(
        items=tuple(items),
        tokens=0,
        budget=budget_tokens,
        left_out=tuple(left_out),
        note=note,
        stale_caught=stale_caught,
        vanished=vanished,
        pending=pending,
    )
    return replace(pack, tokens=estimate_tokens(pack.render()))


def _length(used: int, note: int) -> int:
    """Characters of the text: `used` counts each item with the separator after it."""
    return used + note if note else max(used - len(_SEP), 0)


def _options(c: _Candidate, source: Source) -> list[_Option]:
    """Ways to show one file, richest first."""
    if source.text is None or source.content_hash != c.served_hash:
        why = "not text" if source.text is None else "changed while being read"
        return [_Option((_item(c, source, "path", why),), len(c.hits))]
    lines = [line.removesuffix("\r") for line in source.text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    defined = c.symbols is not None and bool(c.symbols.definitions)
    options: list[_Option] = []
    for hits in _hit_choices(c.hits):
        ranges = _ranges(hits, lines)
        shown = tuple(_item(c, source, "code", _definitions(r.names), r, lines) for r in ranges)
        if ranges and shown not in [o.items for o in options]:
            covered = sum(
                any(r.start <= h.line and h.end_line <= r.end for r in ranges) for h in c.hits
            )
            options.append(_Option(shown, len(c.hits) - covered))
    if not c.hits and lines and not defined:
        head = _Range(1, min(len(lines), HEAD_LINES))
        why = f"lines 1-{head.end} of {len(lines)}"
        options.append(_Option((_item(c, source, "code", why, head, lines),), 0))
    if defined:
        options.append(_Option((_item(c, source, "outline", ""),), len(c.hits)))
    if not options:
        options.append(_Option((_item(c, source, "path", "empty"),), 0))
    return options


def _hit_choices(hits: tuple[SymbolHit, ...]) -> list[tuple[SymbolHit, ...]]:
    """All hits; then without those enclosing another (a class around its method); then the best."""
    specific = tuple(
        h
        for h in hits
        if not any(
            o is not h
            and h.line <= o.line
            and o.end_line <= h.end_line
            and o.end_line - o.line < h.end_line - h.line
            for o in hits
        )
    )
    return [hits, specific, specific[:1]]


@dataclass(frozen=True, slots=True)
class _Range:
    start: int
    end: int
    names: tuple[str, ...] = ()


def _item(
    c: _Candidate,
    source: Source,
    kind: Literal["code", "outline", "path"],
    why: str,
    span: _Range | None = None,
    lines: Sequence[str] = (),
) -> PackItem:
    start, end = (span.start, span.end) if span is not None else (0, 0)
    text = "\n".join(lines[start - 1 : end]) if span is not None else ""
    if kind == "outline" and c.symbols is not None:
        text = outline(c.symbols)
    reason = f"{c.reason}; {why}" if why else c.reason
    draft = PackItem(
        path=c.path,
        content_hash=source.content_hash,
        kind=kind,
        line=start,
        end_line=end,
        text=text,
        tokens=0,
        reason=reason,
    )
    return replace(draft, tokens=estimate_tokens(draft.render()))


def _ranges(hits: Sequence[SymbolHit], lines: Sequence[str]) -> list[_Range]:
    """Definition ranges widened over a few non-blank lines (decorators, comments), merged."""
    spans: list[tuple[int, int, str]] = []
    for hit in hits:
        if not 1 <= hit.line <= len(lines):
            continue  # the index and the text disagree; never show the wrong lines
        start, end = hit.line, min(hit.end_line, len(lines))
        for _ in range(CONTEXT_LINES):
            start -= start > 1 and bool(lines[start - 2].strip())
            end += end < len(lines) and bool(lines[end].strip())
        spans.append((start, end, hit.qualname))
    merged: list[_Range] = []
    for start, end, name in sorted(spans):
        if merged and start <= merged[-1].end + 1:
            last = merged[-1]
            merged[-1] = _Range(last.start, max(last.end, end), (*last.names, name))
        else:
            merged.append(_Range(start, end, (name,)))
    return merged


def _definitions(names: Sequence[str]) -> str:
    return f"definition{'s' * (len(names) > 1)} {', '.join(names)}"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'s' * (count != 1)}"


def _notes(
    files: int,
    outlines: int,
    left_out: int,
    hidden: int,
    vanished: Sequence[str],
    pending: int = 0,
) -> list[str]:
    """Ways to end the pack, longest first; none grows when a count shrinks."""
    unsearched = (
        f" {_plural(pending, 'file')} still being indexed were not searched; grep reads them."
        if pending
        else ""
    )
    if files == 0 and not vanished:
        return [
            f"No file matched the task; try search_code(query) or read_file(path).{unsearched}",
            unsearched.strip(),
        ]
    parts = []
    if outlines:
        parts.append(f"{_plural(outlines, 'file')} shown as outlines only")
    if left_out:
        parts.append(f"{_plural(left_out, 'file')} left out")
    if hidden:
        parts.append(f"{_plural(hidden, 'matching definition')} not shown as code")
    if vanished:
        gone = ", ".join(vanished)
        parts.append(f"{_plural(len(vanished), 'file')} gone from disk, skipped: {gone}")
    if not parts:
        return [f"Context: all {_plural(files, 'file')} shown.{unsearched}", unsearched.strip()]
    counts = f"{outlines:,} outlines only, {left_out:,} left out, {hidden:,} not shown"
    return [
        f"Context: {'; '.join(parts)}. {_HINT}{unsearched}",
        f"Context cut: {counts}.{unsearched}",
        f"Context cut.{unsearched}",
        unsearched.strip(),
    ]


def _with_listing(note: str, paths: Sequence[str], room: int) -> str:
    """The note with as many left-out paths named as fit in `room` more characters."""
    best = note
    for shown in range(1, len(paths) + 1):
        rest = len(paths) - shown
        more = f" and {rest:,} more" if rest else ""
        listed = f"{note} Left out: {', '.join(paths[:shown])}{more}."
        if len(listed) - len(note) > room:
            break
        best = listed
    return best
