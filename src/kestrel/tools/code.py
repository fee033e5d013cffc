"""The code tools: `search_code`, `find_symbol`, `find_references`, `outline` and `repo_map`.

They answer from the context engine's index of the workspace. `CodeIndex` opens that index on
first use, keeps it fresh and shares it between the tools.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.context.engine import RANKED_KINDS, ContextEngine
from kestrel.context.graph import build_graph, personalized_pagerank
from kestrel.context.languages import EXTENSIONS
from kestrel.context.model import FileSymbols, SearchResult, Symbol
from kestrel.context.repomap import RepoMap, render_repo_map
from kestrel.context.symbols import extract_symbols, language_for, outline
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.grep_output import GREP_OUTPUT_FLAGS, GrepCollector, GrepMatch, GrepReport
from kestrel.tools.paths import display_path, looks_binary, resolve_path
from kestrel.tools.search import grep_batches

T = TypeVar("T")
EngineFactory = Callable[[Path], ContextEngine]
"""Opens the engine for a workspace root; its paths must be relative to that root."""

REFRESH_AFTER_S = 2.0
"""A query more than this long after the last scan rescans the workspace first."""
MAX_DEFINITIONS = 50
MAX_REFERENCES = 200
MAX_SUGGESTIONS = 8
OUTLINE_MAX_BYTES = 4 * 1024 * 1024
_BATCH_ARG_CHARS = 100_000


@dataclass(slots=True)
class _Opened:
    engine: ContextEngine
    refreshed_at: float | None = None


class CodeIndex:
    """The context engine of each workspace root, opened on first use, shared by the code tools.

    An engine is not thread-safe and its SQLite connection belongs to the thread that opened
    it, so all engine work runs on one worker thread, under one lock.
    """

    def __init__(
        self, factory: EngineFactory, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._lock = threading.Lock()
        self._opened: dict[Path, _Opened] = {}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kestrel-code-index")
        self._closed = False

    async def run(
        self, root: Path, job: Callable[[ContextEngine], T], touched: Iterable[str] = ()
    ) -> T:
        """Run `job` with `root`'s engine, brought up to date first, off the event loop.

        `touched` names files the session read or wrote: between rescans they are re-checked.
        """
        paths = tuple(touched)  # copied here: the caller's dict may change while the job runs
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._use, root, job, paths)

    def close(self) -> None:
        """Close every engine and stop the worker thread; closing twice does nothing."""
        if not self._closed:
            self._closed = True
            self._worker.submit(self._close_all).result()
            self._worker.shutdown()

    def _use(self, root: Path, job: Callable[[ContextEngine], T], touched: Sequence[str]) -> T:
        with self._lock:
            return job(self._fresh(root.resolve(), touched))

    def _fresh(self, root: Path, touched: Sequence[str]) -> ContextEngine:
        opened = self._opened.get(root)
        if opened is None:
            opened = self._opened[root] = _Opened(self._factory(root))
        engine = opened.engine
        if opened.refreshed_at is None or self._clock() - opened.refreshed_at > REFRESH_AFTER_S:
            # A big change (a first index, a checkout) is read in the background: the query is
            # answered now, without the files not read yet, and says how many those are.
            engine.refresh(wait=False)
            opened.refreshed_at = self._clock()
        else:
            # A stat per file: cheap, and it catches the session's own edits at once.
            known = [path for path in touched if engine.record(path) is not None]
            if known:
                engine.refresh_paths(known)
        return engine

    def _close_all(self) -> None:
        with self._lock:
            for opened in self._opened.values():
                opened.engine.close()
            self._opened.clear()


class _CodeTool:
    """What the code tools share: the index they ask, and that they only read."""

    kind: ClassVar[ToolKind] = "read"

    def __init__(self, index: CodeIndex) -> None:
        self._index = index

    async def _ask(self, ctx: ToolContext, job: Callable[[ContextEngine], T]) -> T:
        return await self._index.run(ctx.root, job, touched=ctx.read_hashes)


class SearchCodeArgs(BaseModel):
    """Arguments of `search_code`."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        description="What you are looking for: the task in words, identifiers, a stack trace.",
    )
    k: int = Field(default=10, ge=1, le=50, description="How many files to return.")


class SearchCode(_CodeTool):
    """Rank the workspace's files and definitions for a query."""

    name: ClassVar[str] = "search_code"
    Args: ClassVar[type[BaseModel]] = SearchCodeArgs
    description: ClassVar[str] = (
        "Find the code that matters for a question or task: ranks the workspace's files "
        "(words, identifiers, paths and stack traces in the query all count) and shows each "
        "file's best-matching definitions as `path:line qualname — signature`, then the top "
        "definitions overall. Use it first when you do not know where something lives; use "
        "grep for an exact string."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Search the index and list the files and definitions found."""
        a = SearchCodeArgs.model_validate(args)
        result = await self._ask(ctx, lambda engine: engine.search(a.query, a.k))
        advice = "ask for fewer files (k), or a narrower query"
        return fit_output(render_search(result), ctx.max_output_chars, advice)


def render_search(result: SearchResult) -> str:
    """Files best first with their definitions, then the best definitions overall."""
    unsearched = (
        f"\n\nThe index is still being built: {_plural(result.pending, 'file')} not read yet "
        "were not searched. grep reads every file; search again shortly for a complete ranking."
        if result.pending
        else ""
    )
    if not result.files:
        return (
            f"No indexed file matches {result.query!r}. Try other words or identifiers, "
            f"or grep for an exact string.{unsearched}"
        )
    lines = [f"{_plural(len(result.files), 'file')} for {result.query!r}, best first:"]
    for rank, hit in enumerate(result.files, 1):
        lines.append(f"{rank}. {hit.path}  (score {hit.score:.3f})")
        lines += [
            f"     {s.path}:{s.line} {s.qualname} — {_one_line(s.signature)}" for s in hit.symbols
        ]
    if result.symbols:
        lines += ["", "Top definitions:"]
        lines += [
            f"  {s.path}:{s.line} {s.qualname} ({s.kind}) — {_one_line(s.signature)}"
            for s in result.symbols[:10]
        ]
    return "\n".join(lines) + unsearched


class FindSymbolArgs(BaseModel):
    """Arguments of `find_symbol`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        description="A definition's name (`refresh`) or dotted name (`Engine.refresh`, "
        "`pkg.module.Engine`).",
    )


class FindSymbol(_CodeTool):
    """Where something is defined."""

    name: ClassVar[str] = "find_symbol"
    Args: ClassVar[type[BaseModel]] = FindSymbolArgs
    description: ClassVar[str] = (
        "Find where a class, function, method, type or constant is defined: every definition "
        "whose name, or the end of whose dotted name, matches, with its path, line range, kind "
        "and signature. Then read_file with that offset to see the code."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Look the name up and list the definitions, or similar names when there are none."""
        a = FindSymbolArgs.model_validate(args)
        wanted = _clean_name(a.name)

        def look(engine: ContextEngine) -> tuple[list[tuple[str, Symbol]], list[str], int]:
            found = find_definitions(engine, wanted)
            similar = [] if found else similar_names(engine, wanted)
            return found, similar, len(engine.paths)

        found, similar, indexed = await self._ask(ctx, look)
        if not found:
            hint = f" Similar names: {', '.join(similar)}." if similar else ""
            return ToolOutcome(
                content=f"No definition named {wanted!r} in the {_plural(indexed, 'indexed file')}."
                f"{hint} Try search_code with words for what it does, or find_references."
            )
        lines = [f"{_plural(len(found), 'definition')} of {wanted!r}:"]
        for path, s in found[:MAX_DEFINITIONS]:
            lines.append(
                f"{path}:{s.line}-{s.end_line}  {s.kind}  {s.qualname} — {_one_line(s.signature)}"
            )
        if len(found) > MAX_DEFINITIONS:
            lines.append(
                f"[{MAX_DEFINITIONS} of {len(found)} shown; give a dotted name to narrow it down]"
            )
        return fit_output("\n".join(lines), ctx.max_output_chars, "give a dotted name")


def find_definitions(engine: ContextEngine, name: str) -> list[tuple[str, Symbol]]:
    """Definitions named `name`, or whose module path and qualname end with dotted `name`."""
    found = engine.definitions_named(name.rpartition(".")[2])
    if "." in name:
        found = [(p, s) for p, s in found if f"{_module_of(p)}.{s.qualname}".endswith(f".{name}")]
    return sorted(found, key=lambda ps: (ps[0], ps[1].line))


def similar_names(engine: ContextEngine, name: str) -> list[str]:
    """Defined names that differ from `name` in case, or that contain it."""
    short = name.rpartition(".")[2].lower()
    names: set[str] = set()
    for path in engine.paths:
        record = engine.record(path)
        if record is not None and record.symbols is not None:
            names.update(s.name for s in record.symbols.definitions if short in s.name.lower())
    return sorted(names, key=lambda n: (n.lower() != short, len(n), n))[:MAX_SUGGESTIONS]


def _module_of(path: str) -> str:
    dot = path.rfind(".")
    stem = path[:dot] if dot > path.rfind("/") else path
    return stem.removesuffix("/__init__").replace("/", ".")


def _clean_name(raw: str) -> str:
    name = raw.strip().removesuffix("()")
    if not name:
        raise ToolFailed("name is empty; give a definition's name, e.g. `parse_config`")
    return name


class FindReferencesArgs(BaseModel):
    """Arguments of `find_references`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The name to find, matched as a whole word.")


class FindReferences(_CodeTool):
    """Where a name is used."""

    name: ClassVar[str] = "find_references"
    Args: ClassVar[type[BaseModel]] = FindReferencesArgs
    description: ClassVar[str] = (
        "Find every use of a name across the indexed files: whole-word matches (not inside "
        "longer identifiers), grouped by file as `line: text`, definitions marked. Use it "
        "before renaming or changing a function's signature, to see what else must change."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Search the indexed files for the name as a word and group the matches by file."""
        a = FindReferencesArgs.model_validate(args)
        name = _clean_name(a.name)

        def look(engine: ContextEngine) -> tuple[list[str], set[tuple[str, int]]]:
            files = sorted(
                p for p in engine.paths if (r := engine.record(p)) and r.kind in RANKED_KINDS
            )
            return files, {(p, s.line) for p, s in find_definitions(engine, name)}

        files, definitions = await self._ask(ctx, look)
        collector = GrepCollector(context=0, limit=MAX_REFERENCES)
        flags = [*GREP_OUTPUT_FLAGS, "--no-config", "--word-regexp", "--fixed-strings"]
        report, problems = await grep_batches(
            collector, [*flags, "--regexp", name], list(_batches(files)), cwd=ctx.root.resolve()
        )
        if problems and not report.matches:
            raise ToolFailed(f"find_references failed: {problems[0].splitlines()[0]}")
        text = render_references(name, report, definitions)
        if problems:
            text += f"\n[some files could not be searched: {problems[0].splitlines()[0]}]"
        return fit_output(text, ctx.max_output_chars, "use grep with a path or glob to narrow it")


def render_references(name: str, report: GrepReport, definitions: set[tuple[str, int]]) -> str:
    """Matches grouped by file, definitions marked, with a note of how many were left out."""
    if not report.matches:
        hint = ""
        if "." in name:
            short = name.rpartition(".")[2]
            hint = f" Names are matched as written; try the short name {short!r}."
        return f"No references to {name!r} in the indexed files.{hint}"
    head = (
        f"{_plural(report.total_matches, 'reference')} to {name!r} in "
        f"{_plural(report.total_files, 'file')} (whole-word matches):"
    )
    lines = [head]
    for path, matches in _by_file(report.matches):
        lines += ["", path]
        for m in matches:
            mark = "  [definition]" if (path, m.line_number) in definitions else ""
            lines.append(f"{m.line_number:>6}: {m.text.strip()}{mark}")
    left = report.total_matches - len(report.matches)
    if left:
        shown_files = len({m.path for m in report.matches})
        lines += [
            "",
            f"[showing the first {len(report.matches)} of {report.total_matches} references "
            f"(in {shown_files} of {report.total_files} files); {left} more not shown: "
            "use grep with a path or glob to see the rest]",
        ]
    return "\n".join(lines)


def _by_file(matches: Sequence[GrepMatch]) -> Iterator[tuple[str, list[GrepMatch]]]:
    grouped: dict[str, list[GrepMatch]] = {}
    for match in matches:
        grouped.setdefault(match.path, []).append(match)
    yield from grouped.items()


def _batches(files: Sequence[str]) -> Iterator[list[str]]:
    """The files in groups whose total length stays well below the argument-list limit."""
    batch: list[str] = []
    size = 0
    for path in files:
        if batch and size + len(path) > _BATCH_ARG_CHARS:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path) + 1
    if batch:
        yield batch


class OutlineArgs(BaseModel):
    """Arguments of `outline`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Source file to outline, relative to the workspace root.")


class Outline:
    """The definitions in one source file, parsed from disk (the index is not needed)."""

    kind: ClassVar[ToolKind] = "read"
    name: ClassVar[str] = "outline"
    Args: ClassVar[type[BaseModel]] = OutlineArgs
    description: ClassVar[str] = (
        "Show a source file's definitions (classes, functions, methods, types) as "
        "`LINE: signature`, nested ones indented, without the bodies. Use it to see what a "
        "large file holds before reading the part you need with read_file."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Parse the file as it is on disk now and list its definitions."""
        a = OutlineArgs.model_validate(args)
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        language = language_for(shown)
        symbols = await asyncio.to_thread(_parse_for_outline, path, shown, language)
        if not symbols.definitions:
            return ToolOutcome(content=f"{shown} ({symbols.language}) has no definitions.")
        head = (
            f"{shown} ({symbols.language}, {_plural(len(symbols.definitions), 'definition')}; "
            "LINE: signature, nested definitions indented):"
        )
        advice = "read_file the part you need, or find_symbol a name"
        return fit_output(f"{head}\n{outline(symbols)}", ctx.max_output_chars, advice)


def _parse_for_outline(path: Path, shown: str, language: str | None) -> FileSymbols:
    if path.is_dir():
        raise ToolFailed(f"{shown} is a directory; outline takes one source file")
    if not path.is_file():
        raise ToolFailed(f"{shown} does not exist; use list_files or find_symbol to find it")
    if language is None:
        known = ", ".join(sorted(set(EXTENSIONS.values())))
        raise ToolFailed(
            f"{shown} is not in a language outline knows ({known}); read it with read_file"
        )
    size = path.stat().st_size
    if size > OUTLINE_MAX_BYTES:
        raise ToolFailed(f"{shown} is {size:,} bytes, too large to outline; use grep instead")
    data = path.read_bytes()
    if looks_binary(data):
        raise ToolFailed(f"{shown} is a binary file; outline only reads source code")
    symbols = extract_symbols(shown, data.decode("utf-8", errors="replace"))
    if symbols is None:
        raise ToolFailed(f"{shown} could not be parsed as {language}")
    return symbols


class RepoMapArgs(BaseModel):
    """Arguments of `repo_map`."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(
        default=2000, ge=100, le=20_000, description="Most tokens the map may take."
    )


class RepoMapTool(_CodeTool):
    """The repository at a glance: its most connected files and their definitions."""

    name: ClassVar[str] = "repo_map"
    Args: ClassVar[type[BaseModel]] = RepoMapArgs
    description: ClassVar[str] = (
        "A map of the repository within a token budget: source files ranked by how they "
        "import and reference one another (weighted toward the files you have read or "
        "edited), each with its top-level definitions as `LINE: signature`. Use it to get "
        "your bearings in an unfamiliar codebase or to find code related to what you work on."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Rank the files and render the map within the budget."""
        a = RepoMapArgs.model_validate(args)
        seeds = {path: 1.0 for path in ctx.read_hashes if not Path(path).is_absolute()}
        ranked = await self._ask(ctx, lambda engine: repository_map(engine, a.budget, seeds))
        shown = ranked.rendered
        if not shown.files_shown:
            return ToolOutcome(content="The workspace has no source files to map.")
        weighted = (
            f", weighted toward {_plural(len(ranked.seeds), 'file')} you have read or edited"
            if ranked.seeds
            else ""
        )
        head = (
            f"Repository map: {len(shown.files_shown)} of {_plural(ranked.files_ranked, 'file')}"
            f", most connected first{weighted} (~{shown.tokens:,} tokens):"
        )
        advice = "ask for a smaller budget"
        return fit_output(f"{head}\n{shown.text}", ctx.max_output_chars, advice)


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedMap:
    """A rendered repository map, how many files were ranked, and the seeds that counted."""

    rendered: RepoMap
    files_ranked: int
    seeds: tuple[str, ...]


def repository_map(
    engine: ContextEngine, budget_tokens: int, seeds: Mapping[str, float] | None = None
) -> RankedMap:
    """Source files ranked by PageRank over imports and references (restarting at `seeds`)."""
    nodes: list[str] = []
    symbols: dict[str, FileSymbols] = {}
    for path in sorted(engine.paths):
        record = engine.record(path)
        if record is None or record.kind != "code":
            continue
        nodes.append(path)
        if record.symbols is not None:
            symbols[path] = record.symbols
    used = {p: w for p, w in (seeds or {}).items() if p in symbols and w > 0}
    ranks = personalized_pagerank(build_graph(symbols, nodes), used)
    ranked = sorted(ranks.items(), key=lambda kv: (-kv[1], kv[0]))
    rendered = render_repo_map(ranked, symbols, budget_tokens)
    return RankedMap(rendered=rendered, files_ranked=len(nodes), seeds=tuple(sorted(used)))


def fit_output(text: str, limit: int, advice: str) -> ToolOutcome:
    """`text` as the outcome, cut at a line end to stay within `limit` with a note saying so."""
    if len(text) <= limit:
        return ToolOutcome(content=text)
    room = max(limit - len(advice) - 80, 0)
    cut = text.rfind("\n", 0, room)
    cut = cut if cut > 0 else room
    note = f"\n[output cut: {len(text) - cut:,} more characters not shown; {advice}]"
    return ToolOutcome(content=text[:cut] + note, truncated=True)


def _one_line(signature: str) -> str:
    return " ".join(signature.split())


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
