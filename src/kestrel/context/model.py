"""Values the context engine produces: symbols, search hits and index reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

FileKind = Literal["code", "text", "binary", "huge", "vendored", "generated"]
"""How the inventory classifies a file; only `code` and `text` are ranked."""
FILE_KINDS: tuple[FileKind, ...] = get_args(FileKind)

SymbolKind = Literal[
    "class",
    "function",
    "method",
    "interface",
    "struct",
    "enum",
    "trait",
    "type",
    "module",
    "constant",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Symbol:
    """One definition in a file: `qualname` is dotted through its enclosing definitions."""

    name: str
    qualname: str
    kind: SymbolKind
    line: int
    end_line: int
    signature: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSymbols:
    """What tree-sitter found in one file."""

    language: str
    definitions: tuple[Symbol, ...] = ()
    references: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SymbolHit:
    """A ranked definition, with the hash of the file it was read from."""

    path: str
    qualname: str
    kind: SymbolKind
    line: int
    end_line: int
    signature: str
    score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FileHit:
    """A ranked file with its best-matching definitions."""

    path: str
    score: float
    content_hash: str
    symbols: tuple[SymbolHit, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """The answer to one query: files best first, definitions best first, and its cost."""

    query: str
    files: tuple[FileHit, ...]
    symbols: tuple[SymbolHit, ...]
    took_ms: float
    stale_caught: int = 0
    pending: int = 0
    """Files still being read in the background, which this answer could not include."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexReport:
    """What one refresh of the index did."""

    files_total: int
    files_ranked: int
    added: int
    changed: int
    removed: int
    took_s: float
    skipped: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    """Files left to read in the background: the refresh returned before reading them."""
