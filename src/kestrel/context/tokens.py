"""Code-aware tokenisation: identifiers kept whole and split into their words."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

# Words that carry no meaning in a task or in code: dropping them keeps posting lists short.
STOPWORDS = frozenset(
    word
    for line in (
        "a an and are as at be but by for from has have i if in into is it its of on or so such",
        "that the their then there these this to was were will with we you your me my our can do",
        "does did not no yes all any some when which who what how why where would should",
        "could just also like get got use used using there here been being than too very only",
        "self cls def return none true false else elif import pass",
    )
    for word in line.split()
)
MIN_LENGTH = 2
MAX_LENGTH = 64


def split_identifier(word: str) -> list[str]:
    """The words of `fooBar_baz2`: foo, bar, baz, 2 (lowercase)."""
    return [part.lower() for part in _PARTS.findall(word)]


# Suffixes folded so that "migration", "migrations" and "migrate" meet, longest first.
_SUFFIXES = (
    ("izations", "iz"), ("ization", "iz"), ("isations", "is"), ("isation", "is"),
    ("ational", "at"), ("ations", "at"), ("ation", "at"), ("ators", "at"), ("ator", "at"),
    ("ating", "at"), ("ated", "at"), ("ates", "at"), ("ate", "at"),
    ("izers", "iz"), ("izer", "iz"), ("izing", "iz"), ("ized", "iz"), ("izes", "iz"), ("ize", "iz"),
    ("ments", ""), ("ment", ""), ("ness", ""), ("ings", ""), ("ing", ""), ("ions", ""),
    ("ion", ""), ("ies", "y"), ("ied", "y"), ("ers", ""), ("er", ""), ("ed", ""),
    ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("shes", "sh"), ("ly", ""), ("s", ""),
)  # fmt: skip
_MIN_STEM = 3


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A light, fast suffix-folding stemmer for lowercase English and identifier words."""
    if len(word) <= _MIN_STEM + 1 or not word.isalpha():
        return word
    if word.endswith(("ss", "us", "is")):
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            word = word[: -len(suffix)] + replacement
            break
    # "value", "values" and "valued" all end as "valu".
    return word[:-1] if word.endswith("e") and len(word) > _MIN_STEM + 1 else word


@lru_cache(maxsize=200_000)
def _expand(word: str) -> tuple[str, ...]:
    """The terms one word contributes; cached because code repeats its words endlessly."""
    if len(word) > MAX_LENGTH:
        return ()
    out: list[str] = []
    whole = word.lower()
    if len(whole) >= MIN_LENGTH and whole not in STOPWORDS:
        out.append(stem(whole))
    parts = split_identifier(word)
    if len(parts) > 1:
        out.extend(stem(p) for p in parts if len(p) >= MIN_LENGTH and p not in STOPWORDS)
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Index terms of `text`: each identifier whole, then its parts when it has several."""
    out: list[str] = []
    for word in _WORD.findall(text):
        out.extend(_expand(word))
    return out


def token_counts(text: str) -> Counter[str]:
    """`Counter(tokens(text))`, computed per distinct word (several times faster on code)."""
    out: Counter[str] = Counter()
    for word, n in Counter(_WORD.findall(text)).items():
        for term in _expand(word):
            out[term] += n
    return out


def path_tokens(path: str) -> list[str]:
    """Index terms of a repository path: directories, the file stem and their words."""
    return tokens(re.sub(r"[/\\.\-]", " ", path))
