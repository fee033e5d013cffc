"""Where a path argument points, which paths a glob picks, and writing files safely."""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

from kestrel.globs import glob_regex
from kestrel.tools.base import ToolFailed

BINARY_SNIFF_BYTES = 8192
"""How much of a file is checked for NUL bytes to decide that it is binary."""

DIFF_MAX_LINES = 300
"""Longest diff announced with a planned write; longer ones are cut with a note."""


class PathRefused(ToolFailed):
    """A path argument points outside the places a tool may use."""


def resolve_path(root: Path, raw: str, *, also_inside: Sequence[Path] = ()) -> Path:
    """Resolve `raw` (relative to `root`, or absolute) and refuse it unless it stays inside.

    `also_inside` names extra directories an absolute path may point into (the artifacts
    directory, for reads). Symlinks are followed, so a link leading out is refused too.
    """
    base = root.resolve()
    allowed = (base, *(extra.resolve() for extra in also_inside))
    given = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
    candidate = given if given.is_absolute() else base / given
    # Judge `..` on the text first, so an escape is named as one rather than as a symlink.
    lexical = Path(os.path.normpath(candidate))
    if not any(_is_within(lexical, place) for place in allowed):
        raise PathRefused(
            f"{raw} is outside the workspace ({base}); use a path relative to it, "
            "or an absolute path inside it"
        )
    resolved = candidate.resolve()
    if not any(_is_within(resolved, place) for place in allowed):
        raise PathRefused(
            f"{raw} leads through a symlink to {resolved}, which is outside the workspace ({base})"
        )
    return resolved


def display_path(root: Path, path: Path) -> str:
    """`path` as the model should write it back: relative to `root` if inside, else absolute."""
    base = root.resolve()
    if _is_within(path, base) and path != base:
        return path.relative_to(base).as_posix()
    return "." if path == base else str(path)


def _is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def sha256_hex(data: bytes | None) -> str | None:
    """The SHA-256 of `data` as hex, or `None` for a file that does not exist."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes_if_file(path: Path) -> bytes | None:
    """The file's bytes, or `None` if nothing is there."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def has_nul(data: bytes) -> bool:
    """True when `data` has a NUL byte near the start: binary, not text in another encoding."""
    return b"\0" in data[:BINARY_SNIFF_BYTES]


def looks_binary(data: bytes) -> bool:
    """True when `data` has a NUL byte near the start or is not valid UTF-8 (edits refuse it)."""
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def unified_diff(
    label: str, before: str | None, after: str, max_lines: int = DIFF_MAX_LINES
) -> str:
    """A unified diff from `before` (None: a new file) to `after`, cut after `max_lines` lines."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    from_name = "/dev/null" if before is None else f"a/{label}"
    raw = difflib.unified_diff(old, new, from_name, f"b/{label}", lineterm="")
    lines: list[str] = []
    for index, item in enumerate(raw):
        lines.append(item.rstrip("\r\n"))
        # Headers (the first two items) carry no line ending of their own; content lines do.
        if index >= 2 and item[:1] in " +-" and not item.endswith("\n"):
            lines.append("\\ No newline at end of file")
    if len(lines) > max_lines:
        cut = len(lines) - max_lines
        lines = [*lines[:max_lines], f"[... diff cut: {cut} more lines]"]
    return "\n".join(lines)


def staged_write(artifacts_dir: Path, after_hash: str) -> Path:
    """Where the new content of an announced write is kept, by its hash, until it lands."""
    return artifacts_dir / "writes" / after_hash


def stage_write(path: Path, data: bytes) -> None:
    """Keep `data` durably at `path` (content-addressed: a file already there holds it)."""
    if not path.is_file():
        write_atomically(path, data)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` all at once: a reader sees the old file or the new, never half.

    Parent directories are created; an existing file keeps its permission bits.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # 0o666 lets the umask decide a new file's mode, as any other editor would.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def remove_leftover_temps(path: Path) -> list[Path]:
    """Delete temporary files a killed `write_atomically` of `path` left beside it."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{12}}\.tmp")
    removed: list[Path] = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return removed
    for sibling in siblings:
        if pattern.fullmatch(sibling.name) and sibling.is_file() and not sibling.is_symlink():
            sibling.unlink(missing_ok=True)
            removed.append(sibling)
    return removed


def _fsync_dir(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk; not every OS allows it.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def count_lines(text: str) -> int:
    """Lines in `text` as an editor counts them: a last line without a newline still counts."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for a gitignore-style glob over `/`-separated relative paths.

    Without a `/` the glob is tried against the file name alone (`*.py`); with one, against the
    whole path (`src/**/*.ts`). `*` and `?` stay within one folder, `**` crosses folders,
    `[abc]` and `{a,b}` work as in a shell.
    """
    body = pattern.strip().removeprefix("/")
    regex = re.compile(glob_regex(body))
    if "/" in body:
        return lambda path: regex.fullmatch(path) is not None
    return lambda path: regex.fullmatch(path.rsplit("/", 1)[-1]) is not None
