"""What a task's text points at: terms, identifiers, paths and stack-trace frames."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kestrel.context.tokens import STOPWORDS, tokens

_FRAME_PY = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([A-Za-z_<>][\w<>]*))?')
_FRAME_GENERIC = re.compile(r"(?:at |\()?((?:[\w.-]+/)+[\w.-]+\.\w{1,5}):(\d+)(?::\d+)?")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z]\w{0,4}|[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|c|h|cc|cpp|hpp|rb|php|cs|kt|swift|toml|cfg|yaml|yml|json|ini|rst|md))\b"
)
_DOTTED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\b")
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2,}[a-z]")
_NOT_IDENTIFIERS = frozenset({"self", "cls", "True", "False", "None", "print", "return"})


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack-trace line: a file, a line and the function it was in."""

    path: str
    line: int
    function: str | None


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """A task's text taken apart for ranking."""

    text: str
    terms: Counter[str]
    identifiers: tuple[str, ...]
    paths: tuple[str, ...]
    dotted: tuple[str, ...]
    frames: tuple[Frame, ...]


def parse_query(text: str) -> TaskQuery:
    """Take a task apart: nothing here knows any repository."""
    frames = tuple(
        Frame(m.group(1).replace("\\", "/"), int(m.group(2)), m.group(3))
        for m in _FRAME_PY.finditer(text)
    ) + tuple(
        Frame(m.group(1), int(m.group(2)), None)
        for m in _FRAME_GENERIC.finditer(text)
        if not m.group(1).startswith(("http:", "https:"))
    )
    paths = _unique(m.group(1) for m in _PATH.finditer(text) if "://" not in m.group(1))
    dotted = _unique(
        m.group(1)
        for m in _DOTTED.finditer(text)
        if not m.group(1).startswith(("self.", "cls.")) and not _PATH.fullmatch(m.group(1))
    )
    return TaskQuery(
        text=text,
        terms=_weighted_terms(text),
        identifiers=_identifiers(text),
        paths=paths,
        dotted=dotted,
        frames=frames,
    )


TITLE_WEIGHT = 2
"""The first line of an issue is its summary: its words count this many times."""


def _weighted_terms(text: str) -> Counter[str]:
    terms = Counter(tokens(text))
    title = text.strip().split("\n", 1)[0]
    for term in tokens(title):
        terms[term] += TITLE_WEIGHT
    return terms


def _identifiers(text: str) -> tuple[str, ...]:
    """Names that look like code: in backticks or code blocks, called, snake_case or camelCase."""
    found: list[str] = []
    for block in _CODE.findall(text):
        found.extend(_IDENT.findall(block))
    found.extend(_CALL.findall(text))
    for word in _IDENT.findall(text):
        inner = word.strip("_")
        if "_" in inner or _CAMEL.search(word) or (word.startswith("__") and word.endswith("__")):
            found.append(word)
    for dotted in _DOTTED.findall(text):
        found.extend(dotted.split("."))
    return _unique(
        word
        for word in found
        if len(word) >= 3 and word not in _NOT_IDENTIFIERS and word.lower() not in STOPWORDS
    )


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
