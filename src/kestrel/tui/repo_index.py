"""The view's hold on the context engine's index of the repository: the definitions `@`
completes, and the repository map `/init` starts AGENTS.md from.

The index is the one the code tools use (same cache, opened the same way): the view asks it
through a `CodeIndex` of its own, which runs every query on one worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kestrel.context.embed import default_embedder
from kestrel.context.engine import ContextEngine
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.tools.code import CodeIndex, RankedMap, repository_map
from kestrel.tui.mentions import SymbolName

MAX_SYMBOLS = 50_000
"""Definitions kept for completion; a bigger repository completes the first ones found."""


def open_engine(root: Path) -> ContextEngine:
    """The engine for `root`, its index in the user's cache, as a session's code tools open it."""
    return ContextEngine.open(
        root,
        embedder=default_embedder(),
        ranker=default_ranker(),
        definition_ranker=default_definition_ranker(),
    )


@dataclass(frozen=True, slots=True)
class Names:
    """The definitions of the files indexed so far, and how many files are still being read."""

    symbols: list[SymbolName]
    pending: int


def symbol_names(engine: ContextEngine) -> Names:
    """Every definition the index holds (up to `MAX_SYMBOLS`), by path."""
    found: list[SymbolName] = []
    for path in sorted(engine.paths):
        record = engine.record(path)
        if record is None or record.symbols is None:
            continue
        for s in record.symbols.definitions:
            found.append(SymbolName(s.name, s.qualname, s.kind, path, s.line))
        if len(found) >= MAX_SYMBOLS:
            break
    return Names(symbols=found[:MAX_SYMBOLS], pending=engine.pending)


def whole_map(engine: ContextEngine, budget_tokens: int) -> RankedMap:
    """The repository map once every file is indexed (a first index is waited for)."""
    engine.refresh()
    return repository_map(engine, budget_tokens)


class RepoIndex:
    """The index of each repository the view works in, opened on first use."""

    def __init__(self) -> None:
        self._index = CodeIndex(open_engine)

    async def names(self, root: Path) -> Names:
        """The definitions indexed so far (a first index goes on in the background)."""
        return await self._index.run(root, symbol_names)

    async def repo_map(self, root: Path, budget_tokens: int) -> RankedMap:
        """The whole repository's map within `budget_tokens`."""
        return await self._index.run(root, lambda engine: whole_map(engine, budget_tokens))

    def close(self) -> None:
        """Close the engines and their thread."""
        self._index.close()
