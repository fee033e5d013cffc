"""`search` and `map`: the context engine's ranking and repository map, as MCP tools."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.context.model import SearchResult, SymbolHit
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.code import CodeIndex, fit_output, repository_map
from kestrel.tools.paths import display_path, resolve_path

SNIPPET_LINES = 6
"""Lines shown of each definition found (its first ones: the signature and what follows)."""
SNIPPET_LINE_CHARS = 200
TEXT_MATCH_LINES = 3
"""Lines shown of a file with no definition found: the first ones that hold a query word."""
SNIPPET_MAX_BYTES = 2 * 1024 * 1024
"""Files larger than this are listed without snippets."""


class SearchArgs(BaseModel):
    """Arguments of `search`."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        description="What to look for: a task in plain words, identifiers, a path or a stack "
        "trace.",
    )
    limit: int = Field(default=10, ge=1, le=50, description="How many files to return.")


class SearchTool:
    """Rank the repository's files and definitions for a query."""

    name: ClassVar[str] = "search"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = SearchArgs
    description: ClassVar[str] = (
        "Find the code that matters for a question or a task in this repository, with "
        "Kestrel's context engine (no model call): files ranked best first by the words, "
        "identifiers, paths and stack-trace frames in the query, each with its best-matching "
        "definitions as `path:first-last kind name` and their first lines. The index is kept "
        "up to date by reading only what changed. Use it when you do not know where something "
        "lives; grep is better for an exact string."
    )

    def __init__(self, index: CodeIndex) -> None:
        """A tool answering from `index`, shared with `map`."""
        self._index = index

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Search the index and show the files, definitions and snippets found."""
        a = SearchArgs.model_validate(args)
        if not a.query.strip():
            raise ToolFailed("query is blank; say what to look for")
        result = await self._index.run(ctx.root, lambda engine: engine.search(a.query, a.limit))
        text = await asyncio.to_thread(render_search, ctx.root, result)
        return fit_output(text, ctx.max_output_chars, "ask for fewer files (limit)")


def render_search(root: Path, result: SearchResult) -> str:
    """Files best first; under each, its definitions found with their first lines numbered."""
    pending = (
        f"\n\nThe index is still being built: {result.pending:,} files not read yet were not "
        "searched; search again shortly for a complete ranking."
        if result.pending
        else ""
    )
    if not result.files:
        return f"No indexed file matches {result.query!r}; try other words or identifiers.{pending}"
    count = len(result.files)
    lines = [f"{count} file{'' if count == 1 else 's'} for {result.query!r}, best first:"]
    for rank, hit in enumerate(result.files, 1):
        lines += ["", f"{rank}. {hit.path}  (score {hit.score:.3f})"]
        text = _file_lines(root, hit.path)
        for symbol in hit.symbols:
            lines.append(f"   {_where(symbol)}")
            lines += _numbered(
                text, symbol.line, min(symbol.end_line, symbol.line + SNIPPET_LINES - 1)
            )
        if not hit.symbols:
            lines += _word_lines(text, result.query)
    return "\n".join(lines) + pending


def _where(symbol: SymbolHit) -> str:
    """Where a definition is, and what: `path:first-last kind name`."""
    return f"{symbol.path}:{symbol.line}-{symbol.end_line}  {symbol.kind}  {symbol.qualname}"


def _file_lines(root: Path, shown: str) -> list[str]:
    """The file's lines, or none when it cannot be read as text (then no snippet is shown)."""
    try:
        path = resolve_path(root, shown)
        if path.stat().st_size > SNIPPET_MAX_BYTES:
            return []
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ToolFailed):
        return []


def _numbered(text: list[str], first: int, last: int) -> list[str]:
    """Lines `first` to `last` (1-based) as `cat -n` shows them, indented under their header."""
    rows = []
    for number in range(max(first, 1), min(last, len(text)) + 1):
        line = text[number - 1].rstrip()
        if len(line) > SNIPPET_LINE_CHARS:
            line = line[:SNIPPET_LINE_CHARS] + " [...]"
        rows.append(f"   {number:>6}\t{line}")
    return rows


def _word_lines(text: list[str], query: str) -> list[str]:
    """The first few lines holding one of the query's words (three letters or more)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", query)}
    rows: list[str] = []
    for number, line in enumerate(text, 1):
        if len(rows) == TEXT_MATCH_LINES:
            break
        if words & {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", line)}:
            rows += _numbered(text, number, number)
    return rows


class MapArgs(BaseModel):
    """Arguments of `map`."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(
        default=2000, ge=100, le=20_000, description="Most tokens the map may take."
    )
    focus: list[str] = Field(
        default_factory=list,
        description="Files to weight the ranking toward (paths relative to the repository), "
        "e.g. the ones you are working on; the files they import and use come first.",
    )


class MapTool:
    """The repository at a glance: its most connected files and their definitions."""

    name: ClassVar[str] = "map"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = MapArgs
    description: ClassVar[str] = (
        "A map of this repository within a token budget, as `kestrel map` prints it: source "
        "files ranked by how they import and reference one another (PageRank, weighted toward "
        "the `focus` files when given), each with its definitions as `LINE: signature`. Use it "
        "to get your bearings in an unfamiliar codebase."
    )

    def __init__(self, index: CodeIndex) -> None:
        """A tool answering from `index`, shared with `search`."""
        self._index = index

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Rank the files and render the map within the budget."""
        a = MapArgs.model_validate(args)
        focus = _focus_paths(ctx.root, a.focus)
        seeds = {path: 1.0 for path in focus}
        ranked = await self._index.run(
            ctx.root, lambda engine: repository_map(engine, a.budget, seeds)
        )
        shown = ranked.rendered
        if not shown.files_shown:
            return ToolOutcome(content="The repository has no source files to map.")
        body, _, last = shown.text.rpartition("\n")
        body = body if last.startswith("... ") else shown.text  # That line names other tools.
        notes = [_footer(len(shown.files_shown), ranked.files_ranked, shown.tokens, a.budget)]
        unused = sorted(set(focus) - set(ranked.seeds))
        if unused:
            notes.append(f"Not source files in the index, so not weighted: {', '.join(unused)}.")
        text = "\n\n".join([body, " ".join(notes)])
        return fit_output(text, ctx.max_output_chars, "ask for a smaller budget")


def _focus_paths(root: Path, given: Iterable[str]) -> list[str]:
    """Each focus path as the index names it; one outside the repository is refused."""
    paths = []
    for raw in given:
        path = resolve_path(root, raw)
        if not path.is_file():
            raise ToolFailed(f"focus path {raw} is not a file in the repository")
        paths.append(display_path(root, path))
    return paths


def _footer(shown: int, ranked: int, tokens: int, budget: int) -> str:
    """What the map shows, and how to see more."""
    head = f"{shown:,} of {ranked:,} source files shown (~{tokens:,} tokens)."
    if shown < ranked:
        return f"{head} Call map with budget={min(budget * 2, 20_000)} to see more, or search."
    return head
