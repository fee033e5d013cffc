"""`kestrel index`, `kestrel search` and `kestrel map`: the context engine from the command line."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from kestrel.cli.drive import EXIT_ERROR, EXIT_USAGE
from kestrel.context.embed import default_embedder
from kestrel.context.engine import ContextEngine
from kestrel.context.index_store import default_cache_dir, index_path_for
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.context.model import IndexReport, SearchResult
from kestrel.protocol.oserrors import error_text
from kestrel.tools.code import repository_map

PROGRESS_MIN_FILES = 500
"""A refresh that must read more files than this shows a progress bar."""

Cwd = Annotated[
    Path | None,
    typer.Option("--cwd", help="The repository (default: the current directory)."),
]


def index_command(cwd: Cwd = None) -> None:
    """Build or update the index of a repository; only files changed since last time are read."""
    root = _repository(cwd)
    with _engine(root) as engine:
        report = _refresh(engine)
        if engine.writing_snapshot:
            # Many files changed since the snapshot: leave a fresh one for the next open.
            typer.echo("kestrel: saving the index snapshot ...", err=True)
            engine.wait_for_snapshot()
    typer.echo(render_report(report, root, index_path_for(root, default_cache_dir())))


def search_command(
    query: Annotated[str, typer.Argument(help="What to look for: words, identifiers, a trace.")],
    cwd: Cwd = None,
    top: Annotated[int, typer.Option("--top", "-n", help="How many files to show.", min=1)] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Rank the repository's files and definitions for QUERY (the index is updated first)."""
    if not query.strip():
        _fail('the search query is empty; say what to look for: kestrel search "QUERY"', EXIT_USAGE)
    root = _repository(cwd)
    with _engine(root) as engine:
        _refresh(engine)
        result = engine.search(query, top)
    typer.echo(json.dumps(search_json(result)) if as_json else render_search(result))


def map_command(
    cwd: Cwd = None,
    budget: Annotated[
        int, typer.Option("--budget", help="Most tokens the map may take.", min=100)
    ] = 2000,
) -> None:
    """Print the repository map: source files ranked by how they import and use each other."""
    root = _repository(cwd)
    with _engine(root) as engine:
        _refresh(engine)
        ranked = repository_map(engine, budget)
    shown = ranked.rendered
    if not shown.files_shown:
        typer.echo("kestrel: no source files to map", err=True)
        return
    typer.echo(_without_trailer(shown.text))
    typer.echo(
        map_footer(len(shown.files_shown), ranked.files_ranked, shown.tokens, budget), err=True
    )


def map_footer(shown: int, ranked: int, tokens: int, budget: int) -> str:
    """The line under the map, for the person: what it shows, and how to see more or search."""
    head = f"{shown:,} of {ranked:,} source files shown (~{tokens:,} tokens)."
    search = "`kestrel search QUERY` to find code by what it does."
    if shown < ranked:
        return f"{head} Run `kestrel map --budget {budget * 2}` to see more, or {search}"
    return f"{head} Run {search}"


def _without_trailer(text: str) -> str:
    """The map without its last line, which tells the model (not a person) how to see more."""
    body, _, last = text.rpartition("\n")
    return body if last.startswith("... ") else text


def render_report(report: IndexReport, root: Path, index: Path) -> str:
    """What a refresh did, as a few aligned lines."""
    skipped = ", ".join(f"{kind} {n:,}" for kind, n in sorted(report.skipped.items())) or "none"
    return "\n".join(
        [
            f"Indexed {root} in {report.took_s:.2f} s",
            f"  files    {report.files_total:,} ({report.files_ranked:,} ranked)",
            f"  changes  {report.added:,} added, {report.changed:,} changed, "
            f"{report.removed:,} removed",
            f"  skipped  {skipped}",
            f"  index    {index}",
        ]
    )


def render_search(result: SearchResult) -> str:
    """Files best first, each with its best-matching definitions under it."""
    if not result.files:
        return f"No indexed file matches {result.query!r}."
    lines: list[str] = []
    for hit in result.files:
        lines.append(f"{hit.score:7.3f}  {hit.path}")
        for s in hit.symbols:
            where = f"{s.line}-{s.end_line}"
            lines.append(
                f"{'':9}{where:>9}  {s.kind:<8}  {s.qualname}  {' '.join(s.signature.split())}"
            )
    lines.append(f"({result.took_ms:.0f} ms)")
    return "\n".join(lines)


def search_json(result: SearchResult) -> dict[str, object]:
    """The documented `--json` shape: files with their symbols, and the time the search took."""
    return {
        "files": [
            {
                "path": hit.path,
                "score": hit.score,
                "symbols": [
                    {
                        "qualname": s.qualname,
                        "kind": s.kind,
                        "line": s.line,
                        "end_line": s.end_line,
                        "signature": s.signature,
                        "score": s.score,
                    }
                    for s in hit.symbols
                ],
            }
            for hit in result.files
        ],
        "took_ms": round(result.took_ms, 3),
    }


def _repository(cwd: Path | None) -> Path:
    """The directory to work in, or a one-line error and exit code 2."""
    root = cwd if cwd is not None else Path.cwd()
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except FileNotFoundError:
        _fail(f"no such directory: {root}", EXIT_USAGE)
    except NotADirectoryError:
        _fail(f"not a directory: {root}", EXIT_USAGE)
    except OSError as exc:
        _fail(f"cannot read directory {root}: {exc.strerror or exc}", EXIT_USAGE)
    return root.resolve()


@contextmanager
def _engine(root: Path) -> Iterator[ContextEngine]:
    # The first run on a machine distils the embedding model: show it like indexing.
    with _progress_bar("preparing the embedding model (once)", min_total=0) as progress:
        embedder = default_embedder(progress=progress)
    try:
        engine = ContextEngine.open(
            root,
            default_cache_dir(),
            embedder=embedder,
            ranker=default_ranker(),
            definition_ranker=default_definition_ranker(),
        )
    except (OSError, sqlite3.Error) as exc:
        index = index_path_for(root, default_cache_dir())
        _fail(f"cannot open the index at {index}: {error_text(exc)}", EXIT_ERROR)
    try:
        yield engine
    finally:
        engine.close()


def _refresh(engine: ContextEngine) -> IndexReport:
    with _progress_bar() as progress:
        return engine.refresh(progress)


@contextmanager
def _progress_bar(
    label: str = "indexing", min_total: int = PROGRESS_MIN_FILES
) -> Iterator[Callable[[int, int], None]]:
    """A progress callback that draws a bar on stderr once there are many items to do."""
    bar: Progress | None = None
    task: TaskID | None = None

    def update(done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            if total <= min_total:
                return
            bar = Progress(
                TextColumn(label),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True),
            )
            task = bar.add_task(label, total=total)
            bar.start()
        assert task is not None
        bar.update(task, completed=done)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"kestrel: {message}", err=True)
    raise typer.Exit(code)
