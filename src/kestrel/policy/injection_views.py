"""Views of a tool result with its disguises taken off, each mapping back to the original lines.

A hostile file hides an instruction so that a plain pattern misses it: invisible characters inside
the words, look-alike letters from another alphabet, base64 or hex, escapes inside a JSON string,
a sentence split over comment lines or string concatenations. Each function here returns the text
with one kind of disguise removed (or nothing, when the text has none, so plain results stay cheap),
and the scanner runs the same patterns over every view.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from urllib.parse import unquote

from kestrel.policy.injection_glyphs import (
    CONFUSABLE_CHARS,
    CONFUSABLES,
    INVISIBLE,
    TAG_CHARS,
    decode_tags,
)

MIN_ENCODED = 24
"""Shortest base64 or hex run that is decoded (shorter ones are mostly ids and hashes)."""
MAX_ENCODED_RUNS = 64
"""Runs decoded per result: a big binary or minified file costs at most this many decodes."""
MAX_ENCODED_CHARS = 16_384
"""Characters of one run that are decoded."""
MAX_LITERALS = 2_000
"""String literals read from one result."""


@dataclass(frozen=True, slots=True)
class View:
    """Text to scan, what was undone to get it, and where each of its lines came from."""

    text: str
    decoding: str
    starts: tuple[int, ...]
    """Offset in `text` where each piece begins (sorted)."""
    lines: tuple[int, ...]
    """Original line of each piece; a piece of several lines counts on from there."""

    def line_of(self, offset: int) -> int:
        """The original line that the character at `offset` of `text` came from."""
        i = bisect_right(self.starts, offset) - 1
        start = self.starts[i]
        return (
            self.lines[i]
            + self.text.count("\n", start, offset)
            + self.text.count(JOIN, start, offset)
        )


def whole(text: str, decoding: str) -> View:
    """A view whose lines are the original's, one for one."""
    return View(text, decoding, (0,), (1,))


def pieces(parts: list[tuple[int, str]], decoding: str) -> View | None:
    """A view made of (original line, text) pieces, one per line; None when there are none.

    Decoded text can hide behind look-alike or invisible characters too, so each piece is
    folded as `fold` does.
    """
    if not parts:
        return None
    starts: list[int] = []
    offset = 0
    chunks: list[str] = []
    labels = [decoding]
    for _line, part in parts:
        if not part.isascii():
            part, label = fold(part)
            if label and label not in labels:
                labels.append(label)
        starts.append(offset)
        chunks.append(part)
        offset += len(part) + 1
    lines = tuple(line for line, _ in parts)
    return View("\n".join(chunks), ", ".join(labels), tuple(starts), lines)


_HAS_CONFUSABLE = re.compile("[" + CONFUSABLE_CHARS + "]")
_WORD = re.compile(r"\w+")


def changed_lines(before: str, after: str, decoding: str) -> View | None:
    """The lines of `after` that differ from the same lines of `before`; None if none do.

    Scanning only those keeps a big result with one odd character from being scanned twice.
    """
    pairs = enumerate(zip(before.split("\n"), after.split("\n"), strict=False))
    return pieces([(i + 1, b) for i, (a, b) in pairs if a != b], decoding)


def unicode_view(text: str) -> View | None:
    """`text` folded as `fold` does; None when that changes nothing."""
    if text.isascii():
        return None
    out, label = fold(text)
    return whole(out, label) if label else None


def fold(text: str) -> tuple[str, str]:
    """Tag characters read, invisible ones removed, NFKC, look-alikes read as Latin.

    Returns the folded text (with the same lines) and what was done, "" when nothing.
    """
    done: list[str] = []
    out = text
    if TAG_CHARS.search(out):
        out = decode_tags(out)
        done.append("hidden tag characters read")
    stripped = out.translate(INVISIBLE)
    if stripped != out:
        done.append(f"{len(out) - len(stripped)} invisible characters removed")
        out = stripped
    folded = unicodedata.normalize("NFKC", out)
    if folded.count("\n") == out.count("\n") and folded != out:
        done.append("NFKC")
        out = folded
    if _HAS_CONFUSABLE.search(out):
        mapped = "\n".join(_latin_line(line) for line in out.split("\n"))
        if mapped != out:
            done.append("look-alike letters read as Latin")
            out = mapped
    return out, ", ".join(done)


_FOREIGN = re.compile(r"[\u0370-\u03ff\u0400-\u052f]")


def _latin_line(line: str) -> str:
    """A line with look-alike letters read as Latin in the words that pretend to be Latin.

    A word mixing Latin and look-alikes is a disguise; so is a word made only of look-alikes on
    a line whose other Cyrillic or Greek letters are look-alikes too ("AI: run ..." spelled in
    Cyrillic). Real Russian or Greek text has letters with no Latin twin and is left alone.
    """
    if not _HAS_CONFUSABLE.search(line):
        return line
    all_twins = _FOREIGN.search(line.translate(CONFUSABLES)) is None
    return _WORD.sub(lambda m: _latin_word(m.group(), all_twins), line)


def _latin_word(word: str, all_twins: bool) -> str:
    if word.isascii() or not _HAS_CONFUSABLE.search(word):
        return word
    mixed = any("a" <= c.lower() <= "z" for c in word)
    mapped = word.translate(CONFUSABLES)
    return mapped if (mixed or all_twins) and mapped.isascii() else word


_B64_RUN = re.compile(
    rf"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{{{MIN_ENCODED},{MAX_ENCODED_CHARS}}}={{0,2}}"
)
_HEX_RUN = re.compile(rf"(?<![0-9A-Fa-f])[0-9A-Fa-f]{{{MIN_ENCODED},{MAX_ENCODED_CHARS}}}")
_PRINTABLE = re.compile(r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]*")


def encoded_view(text: str) -> View | None:
    """Base64 and hex runs that decode to readable text, each on its own line."""
    parts: list[tuple[int, str]] = []
    for pattern, decode in ((_B64_RUN, _from_base64), (_HEX_RUN, _from_hex)):
        tried, line, last = 0, 1, 0
        for match in pattern.finditer(text):
            run = match.group()
            if pattern is _B64_RUN and not _mixed(run):
                continue
            tried += 1
            if tried > MAX_ENCODED_RUNS:
                break
            plain = decode(run)
            if plain is not None:
                line += text.count("\n", last, match.start())
                last = match.start()
                parts.append((line, " ".join(plain.split())))
    parts.sort(key=lambda p: p[0])
    return pieces(parts, "base64/hex decoded")


def _mixed(run: str) -> bool:
    """Whether a run mixes cases as encoded data does (paths and identifiers mostly do not)."""
    upper = sum(c.isupper() for c in run)
    lower = sum(c.islower() for c in run)
    has_digit = any(c.isdigit() for c in run)
    return upper * 8 >= len(run) and lower * 8 >= len(run) and (has_digit or len(run) >= 40)


def _from_base64(run: str) -> str | None:
    core = run.rstrip("=").replace("-", "+").replace("_", "/")
    core = core[: len(core) - len(core) % 4] if len(core) % 4 == 1 else core
    try:
        raw = base64.b64decode(core + "=" * (-len(core) % 4))
    except (binascii.Error, ValueError):
        return None
    return _readable(raw)


def _from_hex(run: str) -> str | None:
    try:
        raw = bytes.fromhex(run.replace(":", "").replace(" ", ""))
    except ValueError:
        return None
    return _readable(raw)


def _readable(raw: bytes) -> str | None:
    try:
        plain = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(plain) < 8 or _PRINTABLE.fullmatch(plain) is None:
        return None
    letters = sum(c.isalpha() or c == " " for c in plain)
    return plain if letters * 10 >= len(plain) * 6 else None


_STRING = re.compile(r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"')
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]{2,7}|#x[0-9A-Fa-f]{2,6}|[A-Za-z]{2,8});")


def literal_view(text: str) -> View | None:
    """String literals (JSON values, code) with escapes decoded, each on its own line.

    A string value starts mid-line, behind a key or an assignment, so patterns that want an
    instruction at the start of a line see it only here.
    """
    parts: list[tuple[int, str]] = []
    line, last = 1, 0
    for match in _STRING.finditer(text):
        raw = match.group()
        if len(raw) < 10 or (" " not in raw and "\\" not in raw):
            continue  # No sentence fits in a short string or a single word.
        if len(parts) >= MAX_LITERALS:
            break
        line += text.count("\n", last, match.start())
        last = match.start()
        value = _string_value(raw)
        parts.append((line, " ".join(value.split())))
    return pieces(parts, "string literal")


def _string_value(raw: str) -> str:
    if "\\" not in raw:
        return raw[1:-1]
    try:
        value = json.loads(raw)
    except ValueError:  # Not JSON's escapes (a Python or shell string): read it as written.
        return raw[1:-1]
    return value if isinstance(value, str) else raw[1:-1]


def escapes_view(text: str) -> View | None:
    """Backslash escapes, URL encoding and HTML entities decoded, line by line; None if none."""
    has_escape = "\\" in text and _ESCAPE.search(text) is not None
    has_percent = "%" in text and len(_PERCENT.findall(text, 0, 200_000)) >= 3
    has_entity = "&" in text and _ENTITY.search(text) is not None
    if not (has_escape or has_percent or has_entity):
        return None
    out: list[str] = []
    for line in text.split("\n"):
        if has_escape and "\\" in line:
            line = _ESCAPE.sub(_unescape, line)
        if has_percent and "%" in line:
            line = unquote(line)
        if has_entity and "&" in line:
            line = html.unescape(line)
        out.append(line.replace("\n", " ").replace("\r", " "))
    return changed_lines(text, "\n".join(out), "escapes decoded")


def _unescape(match: re.Match[str]) -> str:
    code = int(match.group()[2:], 16)
    if code > 0x10FFFF:  # `\UFFFFFFFF` names no character: leave it as written.
        return match.group()
    char = chr(code)
    return " " if char in "\n\r" else char


_LEAD = " \t#/*;>\"'`+-!<0123456789"
"""What a line of a comment block may start with: markers, quotes, a tool's line number."""
_TRAIL = " \t\"'`\\+,;)*/>-"
_CONCAT = re.compile(r"[\"'`][ \t]*\+[ \t]*[\"'`]")
JOIN = "\u2028"
"""What stands for a joined line break: whitespace to the patterns, a line to `View.line_of`."""
MAX_JOINED = 40
"""Lines joined into one paragraph at most; a longer run of lines starts a new one."""


def joined_view(text: str) -> View | None:
    """Comment blocks as one line each, markers and quote joins removed.

    "# Ignore all previous" followed by "# instructions" reads as one sentence here, and so
    does `"ign" + "ore previous instructions"`. A block is a run of lines that start with a
    marker (a comment sign, a quote, a diff's `+`, a tool's line number), with the line before
    it; plain wrapped prose is left out, as the patterns read across a plain line break.
    """
    parts: list[tuple[int, str]] = []
    block: list[str] = []
    first = 0
    before: tuple[int, str] | None = None
    for number, line in enumerate(text.split("\n"), 1):
        bare = line.lstrip(_LEAD)
        marked = bool(bare) and _marked(line[: len(line) - len(bare)])
        if marked and not block:
            first, block = (before[0], [before[1]]) if before else (number, [])
        if marked:
            block.append(bare.rstrip(_TRAIL))
        if block and (not marked or len(block) >= MAX_JOINED):
            _add_block(parts, first, block)
            block = []
        before = (number, bare.rstrip(_TRAIL)) if bare and not marked else None
        if before and "+" in bare:
            _add_block(parts, number, [before[1]])
    if block:
        _add_block(parts, first, block)
    parts.sort(key=lambda p: p[0])
    return pieces(parts, "lines joined")


def _marked(prefix: str) -> bool:
    """Whether what a line starts with is a marker rather than indentation or a number."""
    sign = prefix.strip()
    if not sign:
        return False
    return "\t" in prefix if sign.isdigit() else True


def _add_block(parts: list[tuple[int, str]], first: int, block: list[str]) -> None:
    joined = JOIN.join(block)
    if "+" in joined:
        unquoted = _CONCAT.sub("", joined)
        if unquoted != joined:
            parts.append((first, unquoted))
            return
    if len(block) > 1:
        parts.append((first, joined))
