"""One file's text turned into what the index stores: symbols, bags of terms, chunk texts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kestrel.context.model import FileSymbols
from kestrel.context.symbols import extract_symbols
from kestrel.context.tokens import path_tokens, split_identifier, token_counts

PATH_WEIGHT = 3
"""A path term counts like this many occurrences in the body: names say what a file is."""
TEXT_CHARS = 2000
"""Chunk texts are cut here: embedders read only their start anyway."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """Symbols, the whole file's terms, and the terms of each definition (in symbol order).

    `texts` has one text per definition (its qualified name, then its own lines), then one for
    the file (its path, then the lines outside every definition): what an embedder reads.
    """

    symbols: FileSymbols | None
    terms: Counter[str]
    chunks: tuple[Counter[str], ...]
    texts: tuple[str, ...]


def analyze(path: str, text: str, *, parse: bool = True) -> Analysis:
    """Split `text` along its definitions; every line is counted once, in its innermost owner."""
    symbols = extract_symbols(path, text) if parse else None
    lines = text.splitlines()
    definitions = symbols.definitions if symbols else ()
    owner = [-1] * len(lines)
    order = sorted(
        range(len(definitions)), key=lambda i: (definitions[i].line, -definitions[i].end_line)
    )
    for index in order:
        d = definitions[index]
        for n in range(max(d.line - 1, 0), min(d.end_line, len(lines))):
            owner[n] = index
    regions: list[list[str]] = [[] for _ in range(len(definitions) + 1)]
    for n, line in enumerate(lines):
        regions[owner[n]].append(line)
    chunks: list[Counter[str]] = []
    texts: list[str] = []
    total: Counter[str] = Counter()
    for index, d in enumerate(definitions):
        body = "\n".join(regions[index])
        bag = token_counts(body)
        total.update(bag)
        bag.update(p for p in split_identifier(d.qualname.replace(".", "_")) if len(p) > 1)
        bag[d.name.lower()] += 1
        chunks.append(bag)
        texts.append(f"{d.qualname}\n{body[:TEXT_CHARS]}")
    rest = "\n".join(regions[-1])
    total.update(token_counts(rest))
    for term in path_tokens(path):
        total[term] += PATH_WEIGHT
    texts.append(f"{path}\n{rest[:TEXT_CHARS]}")
    return Analysis(symbols=symbols, terms=total, chunks=tuple(chunks), texts=tuple(texts))
