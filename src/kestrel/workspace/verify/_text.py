"""Small, forgiving readers shared by the output parsers; none of them raises on bad input."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
# Frames in these places are the interpreter's or a dependency's, never the project's.
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python", "<frozen", "/go/src/")
_JSON = json.JSONDecoder()


def strip_ansi(text: str) -> str:
    """`text` without terminal colour and cursor codes."""
    return _ANSI.sub("", text)


def to_int(value: object) -> int | None:
    """`value` as a non-negative int, or None for anything else (bools and junk included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit() and len(value) < 12:
        return int(value)
    return None


def to_str(value: object) -> str | None:
    """`value` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def json_lines(text: str) -> Iterator[dict[str, object]]:
    """Each line of `text` that is a JSON object; other lines (progress, stderr) are skipped."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def json_array(text: str) -> list[object] | None:
    """The first JSON array in `text` that starts a line, or None when there is none.

    Tools print their JSON report on stdout; warnings on stderr arrive interleaved around it.
    """
    for match in re.finditer(r"^\s*\[", text, re.MULTILINE):
        start = match.end() - 1
        try:
            value, _ = _JSON.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list):
            return value
    return None


def is_library_path(path: str) -> bool:
    """Whether a traceback frame's file belongs to an interpreter or an installed package."""
    return any(marker in path for marker in _LIBRARY_MARKERS)


def tail(text: str, max_lines: int = 25, max_chars: int = 2500) -> str:
    """The last lines of `text`, for a failure that only the raw output can explain."""
    lines = strip_ansi(text).rstrip().splitlines()[-max_lines:]
    joined = "\n".join(lines)
    return joined[-max_chars:]
