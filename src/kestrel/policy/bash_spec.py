"""The specifier of a `Bash(...)` rule, read with shell quoting.

Words are split on blanks. Quotes and backslashes work as in the shell: inside `'...'` or
`"..."`, or after `\\`, the characters `*`, `?`, `[`, `(`, `)` and blanks are plain text. An
unquoted `*` matches anything (spaces included); `?` and `[` are always plain text here. A
specifier ending in `:*` is a prefix: every command whose words start with those words.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["BashSpec", "SpecError", "balanced", "read_spec"]

_STAR = object()


class SpecError(ValueError):
    """A Bash specifier that cannot be read: an unclosed quote or a misplaced `:*`."""


@dataclass(frozen=True, slots=True)
class BashSpec:
    """A read Bash specifier: its words with quotes removed, and how it matches."""

    words: tuple[str, ...]
    prefix: bool
    glob: re.Pattern[str] | None
    """A regex over the command's words joined by single spaces, when there is a `*`."""
    literal: int
    """How many leading words are plain text (no `*`): the part of a command the rule names."""


@functools.lru_cache(maxsize=2048)
def read_spec(spec: str) -> BashSpec:
    """Read one specifier; raises `SpecError` saying what is wrong."""
    prefix = spec.endswith(":*") and not spec.endswith("\\:*")
    body = spec[:-2] if prefix else spec
    tokens = _tokens(body)
    starred = any(part is _STAR for word in tokens for part in word)
    if prefix and starred:
        raise SpecError("use either a prefix (words:*) or a glob (*), not both")
    words = tuple("".join(p for p in word if isinstance(p, str)) for word in tokens)
    literal = next((i for i, w in enumerate(tokens) if any(p is _STAR for p in w)), len(words))
    glob = None
    if starred:
        pattern = " ".join(
            "".join(".*" if p is _STAR else re.escape(str(p)) for p in word) for word in tokens
        )
        glob = re.compile(pattern + r"\Z", re.DOTALL)
    return BashSpec(words=words, prefix=prefix, glob=glob, literal=literal)


def balanced(text: str) -> bool:
    """Whether the parentheses of `text` outside quotes and escapes pair up."""
    depth = 0
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0 and not quote


def _tokens(text: str) -> list[list[object]]:
    """Words as lists of plain strings and `_STAR` markers."""
    words: list[list[object]] = []
    word: list[object] | None = None
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if not quote and ch in " \t\n\r":
            if word is not None:
                words.append(word)
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if ch == "\\" and quote != "'" and i + 1 < len(text):
            nxt = text[i + 1]
            keep = quote != '"' or nxt in '$`"\\\n'
            word.append(nxt if keep else ch + nxt)
            i += 2
            continue
        if quote:
            if ch == quote:
                quote = ""
            else:
                word.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch == "*":
            word.append(_STAR)
        else:
            word.append(ch)
        i += 1
    if quote:
        raise SpecError(f"unclosed {quote} quote")
    if word is not None:
        words.append(word)
    return words
