"""Characters that disguise text: invisible ones, tag characters and look-alike letters."""

# The look-alike table is made of ambiguous letters on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import re

_INVISIBLE_RANGES = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200F),  # zero-width space, joiners, direction marks
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x2069),  # bidi isolates
    (0xFEFF, 0xFEFF),  # zero-width no-break space (byte order mark)
)
INVISIBLE: dict[int, None] = {
    code: None for low, high in _INVISIBLE_RANGES for code in range(low, high + 1)
}
"""A `str.translate` table that deletes characters which take no space on screen."""

TAG_CHARS = re.compile("[\U000e0000-\U000e007f]+")
"""Unicode tag characters: invisible twins of ASCII, used to smuggle text past a reader."""

_FLAG = "\U0001f3f4"
"""The black flag that legitimately starts a tag sequence (subdivision flags such as Scotland's)."""

_LOOKALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
    "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "һ": "h", "ԛ": "q", "ԝ": "w", "к": "k",
    "м": "m", "т": "t", "п": "n", "г": "r",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t", "υ": "u", "χ": "x",
    "ε": "e", "ς": "s", "η": "n",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin look-alikes outside ASCII that NFKC keeps
    "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g",
}  # fmt: skip
CONFUSABLE_CHARS = "".join(sorted(_LOOKALIKES))
CONFUSABLES: dict[int, str] = {ord(k): v for k, v in _LOOKALIKES.items()}
"""A `str.translate` table from common Cyrillic and Greek look-alikes to the Latin letter."""


def decode_tags(text: str) -> str:
    """`text` with tag characters read as the ASCII they shadow, except inside emoji flags."""
    return TAG_CHARS.sub(lambda m: _tag_text(text, m), text)


def hidden_tag_text(text: str) -> list[tuple[int, str]]:
    """(offset, ASCII) of each run of tag characters that is not part of an emoji flag."""
    found: list[tuple[int, str]] = []
    if text.isascii():
        return found
    for match in TAG_CHARS.finditer(text):
        plain = _tag_text(text, match)
        if plain.strip():
            found.append((match.start(), plain))
    return found


def _tag_text(text: str, match: re.Match[str]) -> str:
    if match.start() > 0 and text[match.start() - 1] == _FLAG:
        return ""
    return "".join(chr(ord(c) - 0xE0000) for c in match.group() if 0xE0020 <= ord(c) <= 0xE007E)
