"""Elision markers in lazy edits: which lines stand for unchanged code, per language.

A marker is a line such as `# ... existing code ...`, `// ... rest of the function ...`,
`/* ... */`, `<!-- ... -->` or a bare `...`. A bare `...` is also valid code in Python (the
`Ellipsis` body of a stub), so there it is only *doubtful* when it sits where a block body
would; the merge then tries both readings. A comment that only says code was left out
(`# rest of the code unchanged`) without the dots is refused rather than taken for new code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

Kind = Literal["code", "marker", "doubtful"]

_OPENERS = r"(?:\{/\*|#|//|/\*|<!--|--|;|%)"
_CLOSERS = r"(?:\*/\}|\*/|-->)"
_DOTS = r"(?:\.{3,}|\u2026)"
_WORDS = r"[A-Za-z][\w ,'()/:=-]*?"
_COMMENT_MARKER = re.compile(
    rf"{_OPENERS}\s*(?:{_DOTS}\s*(?:{_WORDS}\s*(?:{_DOTS})?)?|({_WORDS})\s*{_DOTS})\s*{_CLOSERS}?"
)
"""`# ...`, `// ... rest of the function ...`, `/* ... */`, `<!-- ... -->`, `// existing ...`."""
_BARE_MARKER = re.compile(rf"{_DOTS}(\s*)({_WORDS})?\s*({_DOTS})?|\[{_DOTS}\]")
"""`...`, `…`, `[...]`, `... existing code ...`; `...args,` (a JavaScript spread) is code."""
_NOTE = re.compile(
    r"(?:the\s+)?(?:rest(?:\s+of)?|remaining|existing|other|previous|unchanged|same|"
    r"everything\s+else)\b[\w\s,'()-]{0,60}"
)
_NOTE_NOUN = re.compile(
    r"\b(?:code|lines?|file|functions?|methods?|class|body|content|unchanged|implementation|"
    r"imports|tests|definitions|as\s+before|here)\b"
)
_COMMENT_TEXT = re.compile(rf"{_OPENERS}\s*(.*?)\s*{_CLOSERS}?")

ELLIPSIS_IS_CODE = frozenset({".py", ".pyi", ".pyw", ".ipynb", ".txt", ".md", ".rst", ""})
"""Where a bare `...` line can be real content (Python's `Ellipsis`, or prose)."""


def is_marker_line(line: str) -> bool:
    """True for a line in any of the marker forms (whatever the language)."""
    text = line.strip()
    if not text or ("." not in text and "\u2026" not in text):
        return False
    comment = _COMMENT_MARKER.fullmatch(text)
    if comment is not None:
        # Words before the dots must say code was left out: `# Retrying...` is a comment.
        words = comment.group(1)
        return words is None or _is_note_text(words)
    bare = _BARE_MARKER.fullmatch(text)
    if bare is None:
        return False
    space, words, dots = bare.groups()
    # Right after the dots, a single word with nothing after it is a spread (`...rest`).
    return not words or bool(space) or bool(dots) or " " in words.strip()


def is_bare_ellipsis(line: str) -> bool:
    """A line that is only `...` (or `…`): a marker in most languages, code in Python."""
    return line.strip() in ("...", "\u2026")


def looks_like_note(line: str) -> bool:
    """A comment that says code was left out but has no dots (`# rest of the code unchanged`)."""
    found = _COMMENT_TEXT.fullmatch(line.strip())
    if found is None or not found.group(0).lstrip().startswith(("#", "/", "<", "-", ";", "%")):
        return False
    return _is_note_text(found.group(1))


def _is_note_text(words: str) -> bool:
    words = words.lower().strip().rstrip(".:")
    return (
        bool(words)
        and len(words.split()) <= 8
        and _NOTE.fullmatch(words) is not None
        and _NOTE_NOUN.search(words) is not None
    )


def suffix_of(path: str) -> str:
    """The lower-case extension of `path` (`""` when it has none)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def classify(lines: Sequence[str], path: str) -> list[Kind]:
    """Each edit line's reading: code, marker, or a bare `...` that may be either."""
    ellipsis_code = suffix_of(path) in ELLIPSIS_IS_CODE
    kinds: list[Kind] = []
    for n, line in enumerate(lines):
        if not is_marker_line(line) or _doctest_continuation(lines, n):
            kinds.append("code")
        elif ellipsis_code and is_bare_ellipsis(line) and _in_code_position(lines, n):
            kinds.append("doubtful")
        elif _comment_with_words(line):
            kinds.append("doubtful")  # `# ... or in a module directive`: a real comment too.
        else:
            kinds.append("marker")
    return kinds


_AFTER_DOTS = re.compile(rf"{_OPENERS}\s*{_DOTS}\s*(.*?)\s*(?:{_DOTS})?\s*{_CLOSERS}?")


def _comment_with_words(line: str) -> bool:
    """A comment that starts with dots and goes on with words that do not say code was left
    out: it may be a marker or an ordinary comment."""
    found = _AFTER_DOTS.fullmatch(line.strip())
    words = found.group(1) if found else ""
    return bool(words) and not _is_note_text(words)


def _doctest_continuation(lines: Sequence[str], n: int) -> bool:
    """`... more code` right after a doctest's `>>>` (or another `...`) line: code."""
    text = lines[n].strip()
    if not text.startswith("... ") and text != "...":
        return False
    before = next((lines[k].strip() for k in range(n - 1, -1, -1) if lines[k].strip()), "")
    return before.startswith((">>> ", "... ")) and not before.startswith("... existing")


def _in_code_position(lines: Sequence[str], n: int) -> bool:
    """Whether a bare `...` at line `n` sits where Python code could: a block's body, or an
    item inside brackets (`x[..., 0]` split over lines)."""
    before = next((lines[k] for k in range(n - 1, -1, -1) if lines[k].strip()), "")
    opener = before.split("#", 1)[0].rstrip()
    if opener.endswith(":") and _indent(lines[n]) > _indent(before):
        return True
    if before.rstrip().endswith(('"""', "'''")) and _indent(lines[n]) == _indent(before):
        return True  # A stub's body after its docstring.
    return opener.endswith(("(", "[", "{", ","))


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
