"""A repository map: the best-ranked files with their definitions' signatures, within a budget.

The map is how the model sees a repository it has not read: a file per path line, then one line
per top-level definition and member (`LINE: signature`, indented by nesting). Files go in best
first until the budget runs out; a file that does not fit whole is tried with its top-level
definitions only, then its public top-level ones, then as a bare path. The last line says what
was left out and how to see it, so a cut map never looks like the whole repository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kestrel.context.budget import estimate_tokens, max_chars
from kestrel.context.model import FileSymbols, SymbolKind

MAX_SIGNATURE_CHARS = 160
"""Longer signatures (a dozen keyword arguments, a long type) are cut: the map is a pointer."""

_CONTAINERS: frozenset[SymbolKind] = frozenset(
    {"class", "interface", "struct", "enum", "trait", "type", "module"}
)
_INDENT = "  "


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoMap:
    """A rendered map, the files it shows (best first), how many it left out, and its size."""

    text: str
    files_shown: tuple[str, ...]
    files_left_out: int
    tokens: int


def _one_line(signature: str) -> str:
    flat = " ".join(signature.split())
    if len(flat) > MAX_SIGNATURE_CHARS:
        return flat[: MAX_SIGNATURE_CHARS - 3] + "..."
    return flat


def _outlines(path: str, symbols: FileSymbols | None) -> list[list[str]]:
    """The ways to show one file, richest first: full, top-level, public top-level, bare path."""
    if symbols is None or not symbols.definitions:
        return [[path]]
    kinds = {s.qualname: s.kind for s in symbols.definitions}
    full = [path]
    top = [path]
    public = [path]
    for symbol in sorted(symbols.definitions, key=lambda s: (s.line, s.qualname)):
        depth = symbol.qualname.count(".")
        if depth > 1:
            continue
        # A member sits in a class-like parent; a function's local helpers are not part of its
        # interface. A parent defined elsewhere (a Go method's receiver type) counts as one.
        if depth == 1 and kinds.get(symbol.qualname.rpartition(".")[0], "class") not in _CONTAINERS:
            continue
        line = f"{_INDENT * (depth + 1)}{symbol.line}: {_one_line(symbol.signature or symbol.name)}"
        full.append(line)
        if depth == 0:
            top.append(line)
            if not symbol.name.startswith("_"):
                public.append(line)
    variants = [full, top, public, [path]]
    return [v for i, v in enumerate(variants) if v not in variants[:i]]


def _files(count: int) -> str:
    return "file" if count == 1 else "files"


def _trailers(left_out: int, shown: int) -> tuple[str, ...]:
    """Ways to end the map, longest first; the empty one when even the shortest will not fit."""
    if left_out == 0:
        return (f"... all {shown:,} {_files(shown)} shown", "")
    return (
        f"... {left_out:,} more {_files(left_out)} not shown; "
        "use repo_map with a larger budget, outline(path) or search_code(query)",
        f"... {left_out:,} more {_files(left_out)} not shown",
        f"... {left_out:,} more",
        "",
    )


def _length(used: int, trailer: str) -> int:
    """Characters of the text: `used` counts each line with the newline after it."""
    return used + len(trailer) if trailer else max(used - 1, 0)


def render_repo_map(
    ranked: Sequence[tuple[str, float]],
    symbols: Mapping[str, FileSymbols],
    budget_tokens: int,
) -> RepoMap:
    """The best-ranked files with their outlines, as many as fit in `budget_tokens`."""
    paths = list(dict.fromkeys(path for path, _ in ranked))
    if not paths:
        return RepoMap(text="", files_shown=(), files_left_out=0, tokens=0)
    limit = max_chars(budget_tokens)
    lines: list[str] = []
    shown: list[str] = []
    used = 0
    for path in paths:
        left_after = len(paths) - len(shown) - 1
        # Room is kept for the full closing line, unless nothing would be left to point at.
        trailer = _trailers(left_after, len(shown) + 1)[0 if left_after else -1]
        for outline in _outlines(path, symbols.get(path)):
            size = sum(len(line) + 1 for line in outline)
            if _length(used + size, trailer) <= limit:
                lines.extend(outline)
                shown.append(path)
                used += size
                break
        else:
            break
    left_out = len(paths) - len(shown)
    trailer = next(t for t in _trailers(left_out, len(shown)) if _length(used, t) <= limit)
    text = "\n".join([*lines, trailer] if trailer else lines)
    return RepoMap(
        text=text,
        files_shown=tuple(shown),
        files_left_out=left_out,
        tokens=estimate_tokens(text),
    )
