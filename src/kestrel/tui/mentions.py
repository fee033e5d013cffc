"""What `@name` in the prompt may stand for: a file of the repository, or a definition from the
context engine's index (`@path:qualname`, so the model knows where it is).

Pure: the prompt hands in the line before the cursor, the file names and the symbol names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MENTION = re.compile(r"@([\w./-]*)$")
MAX_CANDIDATES = 50


@dataclass(frozen=True, slots=True)
class SymbolName:
    """A definition as completion offers it."""

    name: str
    qualname: str
    kind: str
    path: str
    line: int

    @property
    def mention(self) -> str:
        """What `@` completes to: the file, then the dotted name in it."""
        return f"{self.path}:{self.qualname}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One thing `@partial` may stand for: the text it completes to, and how it is listed."""

    text: str
    label: str


def candidates(
    partial: str, files: Sequence[str], symbols: Sequence[SymbolName] = ()
) -> list[Candidate]:
    """Files whose path (else whose name) starts with `partial`, then definitions whose name or
    dotted name does (else the same, ignoring case); at most `MAX_CANDIDATES`."""
    found = [f for f in files if f.startswith(partial)] or [
        f for f in files if f.rsplit("/", 1)[-1].startswith(partial)
    ]
    out = [Candidate(text=f, label=f) for f in found[:MAX_CANDIDATES]]
    if partial:
        out += [
            Candidate(text=s.mention, label=f"{s.qualname}  {s.kind} · {s.path}:{s.line}")
            for s in _symbols(partial, symbols)[: MAX_CANDIDATES - len(out)]
        ]
    return out


def _symbols(partial: str, symbols: Sequence[SymbolName]) -> list[SymbolName]:
    exact = [s for s in symbols if s.name.startswith(partial) or s.qualname.startswith(partial)]
    if not exact:
        low = partial.lower()
        exact = [s for s in symbols if s.name.lower().startswith(low)]
    return sorted(exact, key=lambda s: (len(s.name), s.name, s.path, s.line))


def common_prefix(texts: Sequence[str]) -> str:
    """The longest start every text shares."""
    if not texts:
        return ""
    common = texts[0]
    for text in texts[1:]:
        while not text.startswith(common):
            common = common[:-1]
    return common


def complete_mention(
    line: str, files: Sequence[str], symbols: Sequence[SymbolName] = ()
) -> str | None:
    """`line` with its trailing `@partial` completed to the longest text every candidate
    shares (and a space when only one is left); None when nothing matches or nothing would
    change."""
    found = MENTION.search(line)
    if found is None:
        return None
    partial = found.group(1)
    texts = [c.text for c in candidates(partial, files, symbols)]
    if not texts:
        return None
    if len(texts) == 1:
        return line[: found.start(1)] + texts[0] + " "
    common = common_prefix(texts)
    if not common.startswith(partial) or len(common) == len(partial):
        return None  # Nothing certain to add: what was typed stays.
    return line[: found.start(1)] + common
