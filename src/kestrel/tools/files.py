"""The file tools: `read_file`, `list_files`, `write_file` and `edit_file`."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import PlannedWrite, ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.paths import (
    count_lines,
    display_path,
    looks_binary,
    read_bytes_if_file,
    resolve_path,
    sha256_hex,
    unified_diff,
    write_atomically,
)
from kestrel.tools.search import list_paths

READ_DEFAULT_LIMIT = 2000
READ_MAX_LINE_CHARS = 2000
READ_MAX_CHARS = 100_000
"""A page stops early rather than grow past this; the note says where to go on."""
READ_MAX_BYTES = 64 * 1024 * 1024
LIST_MAX_ENTRIES = 1000
EDIT_DIFF_LINES = 40


class ReadFileArgs(BaseModel):
    """Arguments of `read_file`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to read, relative to the workspace root.")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based).")
    limit: int = Field(default=READ_DEFAULT_LIMIT, ge=1, description="Most lines to show.")


class ReadFile:
    """Show a text file's lines, numbered, a page at a time."""

    name: ClassVar[str] = "read_file"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = ReadFileArgs
    description: ClassVar[str] = (
        "Read a text file. Lines come numbered (number, tab, line); numbers are not part of "
        "the file. Long files come in pages of `limit` lines: continue with the `offset` the "
        "closing note gives. Also reads saved full command output named by `bash`."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Read one page of the file."""
        a = ReadFileArgs.model_validate(args)
        path = resolve_path(ctx.root, a.path, also_inside=(ctx.artifacts_dir,))
        shown = display_path(ctx.root, path)
        data = await asyncio.to_thread(_read_for_display, path, shown)
        if not data:
            return ToolOutcome(content=f"{shown} is empty (0 bytes).")
        if looks_binary(data):
            raise ToolFailed(
                f"{shown} is a binary file ({len(data):,} bytes); read_file only shows text "
                "(use bash, e.g. `xxd` or `file`, to inspect it)"
            )
        text = data.decode("utf-8").removeprefix("\ufeff")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        if a.offset > len(lines):
            has = _lines(len(lines))
            raise ToolFailed(f"offset {a.offset} is past the end: {shown} has {has}")
        return ToolOutcome(content=number_lines(lines, a.offset, a.limit))


def _read_for_display(path: Path, shown: str) -> bytes:
    if path.is_dir():
        raise ToolFailed(f"{shown} is a directory; use list_files to see what it holds")
    if not path.exists():
        raise ToolFailed(f"{shown} does not exist; use list_files or grep to find the right path")
    size = path.stat().st_size
    if size > READ_MAX_BYTES:
        raise ToolFailed(
            f"{shown} is {size:,} bytes, too large for read_file; "
            "use grep, or bash with head, tail or sed -n, to look at parts of it"
        )
    return path.read_bytes()


def number_lines(lines: list[str], offset: int, limit: int) -> str:
    """Lines from `offset` (1-based) as `cat -n` prints them, with a note when more remain."""
    total = len(lines)
    rows: list[str] = []
    used = 0
    last = offset - 1
    for number in range(offset, min(total, offset + limit - 1) + 1):
        line = lines[number - 1].removesuffix("\r")
        if len(line) > READ_MAX_LINE_CHARS:
            line = f"{line[:READ_MAX_LINE_CHARS]} [... line cut: {len(line):,} characters in all]"
        row = f"{number:>6}\t{line}"
        if rows and used + len(row) > READ_MAX_CHARS:
            break
        rows.append(row)
        used += len(row) + 1
        last = number
    if last < total:
        rows.append(
            f"[lines {offset}-{last} of {total} shown; "
            f"call read_file with offset={last + 1} to continue]"
        )
    return "\n".join(rows)


class ListFilesArgs(BaseModel):
    """Arguments of `list_files`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(default=".", description="Folder to list; default the workspace root.")
    pattern: str | None = Field(
        default=None, description="Only files matching this glob, e.g. '*.py' or 'src/**/*.ts'."
    )


class ListFiles:
    """List the files under a folder, as git would see them."""

    name: ClassVar[str] = "list_files"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = ListFilesArgs
    description: ClassVar[str] = (
        "List files under a folder (recursively, sorted, skipping what .gitignore excludes), "
        "optionally only those matching a glob. Use it to find your way around the project."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """List the files, noting how many were left out past the cap."""
        a = ListFilesArgs.model_validate(args)
        target = resolve_path(ctx.root, a.path, also_inside=(ctx.artifacts_dir,))
        shown = display_path(ctx.root, target)
        if not target.exists():
            raise ToolFailed(f"{shown} does not exist")
        paths, problems = await list_paths(ctx.root, target, a.pattern)
        if not paths:
            matching = f" matching {a.pattern!r}" if a.pattern else ""
            return ToolOutcome(content=f"No files{matching} under {shown}.")
        rows = paths[:LIST_MAX_ENTRIES]
        if len(paths) > len(rows):
            rows.append(
                f"[{len(rows)} of {len(paths)} files shown; {len(paths) - len(rows)} left out: "
                "list a subfolder or give a pattern]"
            )
        if problems:
            rows.append(f"[some folders could not be read: {problems.splitlines()[0]}]")
        return ToolOutcome(content="\n".join(rows))


class WriteFileArgs(BaseModel):
    """Arguments of `write_file`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to create or overwrite, relative to the workspace root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile:
    """Create a file, or replace one's whole content."""

    name: ClassVar[str] = "write_file"
    kind: ClassVar[ToolKind] = "edit"
    Args: ClassVar[type[BaseModel]] = WriteFileArgs
    description: ClassVar[str] = (
        "Create a file, or overwrite an existing one with the full new content (missing "
        "folders are created). For a change to part of an existing file, prefer edit_file."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Write the file atomically once the planned write has been announced."""
        a = WriteFileArgs.model_validate(args)
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        if path.is_dir():
            raise ToolFailed(f"{shown} is a directory; give a file path")
        before = await asyncio.to_thread(read_bytes_if_file, path)
        after = a.content.encode("utf-8")
        lines = _lines(count_lines(a.content))
        if before == after:
            same = f"{shown} already has exactly this content ({lines}); nothing was written."
            return ToolOutcome(content=same)
        await _commit(ctx, path, shown, before, after, _diff(shown, before, a.content))
        if before is None:
            return ToolOutcome(content=f"Created {shown} ({lines}).")
        had = count_lines(before.decode("utf-8", errors="replace"))
        return ToolOutcome(content=f"Overwrote {shown} ({lines}; it had {had}).")


class EditFileArgs(BaseModel):
    """Arguments of `edit_file`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to edit, relative to the workspace root.")
    old_str: str = Field(description="Exact text to replace, including whitespace; must be unique.")
    new_str: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence of old_str.")


class EditFile:
    """Replace an exact piece of text in a file."""

    name: ClassVar[str] = "edit_file"
    kind: ClassVar[ToolKind] = "edit"
    Args: ClassVar[type[BaseModel]] = EditFileArgs
    description: ClassVar[str] = (
        "Replace exact text in an existing file. `old_str` must match the file character for "
        "character (indentation included, without read_file's line numbers) and occur once, "
        "unless replace_all is true; include enough surrounding lines to make it unique."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Make the replacement and show the changed lines."""
        a = EditFileArgs.model_validate(args)
        if not a.old_str:
            raise ToolFailed(
                "old_str is empty; to create a file or replace all of it, use write_file"
            )
        if a.old_str == a.new_str:
            raise ToolFailed("old_str and new_str are the same; the edit would change nothing")
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        before = await asyncio.to_thread(_read_for_edit, path, shown)
        text = before.decode("utf-8")
        outcome = replace_exact(text, a.old_str, a.new_str, replace_all=a.replace_all)
        if isinstance(outcome, NoMatch):
            raise ToolFailed(f"old_str was not found in {shown}.{outcome.hint}")
        if isinstance(outcome, Ambiguous):
            at = ", ".join(str(n) for n in outcome.lines)
            raise ToolFailed(
                f"old_str occurs {len(outcome.lines)} times in {shown} (at lines {at}); include "
                "more surrounding lines to pick one, or set replace_all to true to change them all"
            )
        after = outcome.text.encode("utf-8")
        await _commit(ctx, path, shown, before, after, _diff(shown, before, outcome.text))
        count = len(outcome.lines)
        where = ", ".join(str(n) for n in outcome.lines)
        replaced = f"1 occurrence (line {where})" if count == 1 else f"{count} (lines {where})"
        snippet = unified_diff(shown, text, outcome.text, max_lines=EDIT_DIFF_LINES)
        return ToolOutcome(content=f"Edited {shown}: replaced {replaced}.\n\n{snippet}")


def _read_for_edit(path: Path, shown: str) -> bytes:
    if path.is_dir():
        raise ToolFailed(f"{shown} is a directory, not a file")
    data = read_bytes_if_file(path)
    if data is None:
        raise ToolFailed(f"{shown} does not exist; use write_file to create it")
    if looks_binary(data):
        raise ToolFailed(
            f"{shown} is a binary file ({len(data):,} bytes); edit_file only edits text"
        )
    return data


def _diff(shown: str, before: bytes | None, after: str) -> str:
    if before is not None and looks_binary(before):
        return f"Binary file {shown} replaced by text ({len(after.encode('utf-8')):,} bytes)"
    old = None if before is None else before.decode("utf-8")
    return unified_diff(shown, old, after)


async def _commit(
    ctx: ToolContext, path: Path, shown: str, before: bytes | None, after: bytes, diff: str
) -> None:
    # The planned write is announced (and made durable by the loop) before the file changes.
    plan = PlannedWrite(
        path=shown, before_hash=sha256_hex(before), after_hash=sha256_hex(after), diff=diff
    )
    await ctx.before_write(plan)
    try:
        await asyncio.to_thread(write_atomically, path, after)
    except OSError as exc:
        raise ToolFailed(f"could not write {shown}: {exc.strerror or exc}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class Replaced:
    """The text after the edit, and the lines (1-based, in the old text) where it changed."""

    text: str
    lines: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMatch:
    """`old_str` is not in the text; `hint` points at near misses (empty if none found)."""

    hint: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ambiguous:
    """`old_str` occurs more than once; `lines` are where each occurrence starts."""

    lines: tuple[int, ...]


def replace_exact(
    text: str, old: str, new: str, *, replace_all: bool
) -> Replaced | NoMatch | Ambiguous:
    """Replace `old` by `new` in `text`, leaving every other character as it was.

    When the text uses CRLF and `old` uses LF (or the other way round), `old` and `new` are
    converted to the text's line endings before matching.
    """
    for old_form, new_form in _line_ending_forms(text, old, new):
        starts = _occurrences(text, old_form)
        if not starts:
            continue
        lines = tuple(text.count("\n", 0, start) + 1 for start in starts)
        if len(starts) > 1 and not replace_all:
            return Ambiguous(lines=lines)
        return Replaced(text=text.replace(old_form, new_form), lines=lines)
    return NoMatch(hint=_near_miss_hint(text, old))


def _line_ending_forms(text: str, old: str, new: str) -> list[tuple[str, str]]:
    forms = [(old, new)]
    if "\r\n" in text and "\n" in old and "\r\n" not in old:
        forms.append((_to_crlf(old), _to_crlf(new)))
    if "\r\n" in old and "\r\n" not in text:
        forms.append((old.replace("\r\n", "\n"), new.replace("\r\n", "\n")))
    return forms


def _to_crlf(value: str) -> str:
    return re.sub(r"(?<!\r)\n", "\r\n", value)


def _occurrences(text: str, needle: str) -> list[int]:
    # Non-overlapping, left to right: the same occurrences `str.replace` would change.
    starts: list[int] = []
    at = text.find(needle)
    while at != -1:
        starts.append(at)
        at = text.find(needle, at + len(needle))
    return starts


_NUMBERED = re.compile(r"^\s*\d+\t")


def _near_miss_hint(text: str, old: str) -> str:
    wanted = [line for line in old.split("\n") if line.strip()]
    if not wanted:
        return ""
    if all(_NUMBERED.match(line) for line in wanted):
        return " It looks like old_str includes read_file's line numbers; leave them out."
    lines = text.split("\n")
    key = _squeeze(wanted[0])
    found = [n for n, line in enumerate(lines) if _squeeze(line) == key]
    if not found:
        found = [n for n, line in enumerate(lines) if _squeeze(line).casefold() == key.casefold()]
    if not found:
        return " Read the file again and copy the exact text."
    span = min(len(old.split("\n")), 6)
    excerpts = [_excerpt(lines, first, span) for first in found[:3]]
    return (
        " Its first line matches these lines when whitespace and case are ignored; "
        "copy the exact text from them:\n" + "\n--\n".join(excerpts)
    )


def _excerpt(lines: list[str], first: int, span: int) -> str:
    end = min(first + span, len(lines))
    return "\n".join(f"{n + 1:>6}\t{lines[n].removesuffix(chr(13))}" for n in range(first, end))


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def _squeeze(line: str) -> str:
    # Whitespace-blind form of a line, for spotting near misses cheaply.
    return "".join(line.split())
