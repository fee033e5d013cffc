"""The file tools: `read_file`, `list_files`, `write_file` and `edit_file`."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.edits import Ambiguous, EditError, NoMatch, apply_edit
from kestrel.edits.syntax import new_syntax_errors
from kestrel.tools.base import PlannedWrite, ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.crash_hook import before_landing
from kestrel.tools.paths import (
    count_lines,
    display_path,
    has_nul,
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
        if path.is_relative_to(ctx.root.resolve()):
            ctx.read_hashes[shown] = sha256_hex(data) or ""
        if not data:
            return ToolOutcome(content=f"{shown} is empty (0 bytes).")
        if has_nul(data):
            raise ToolFailed(
                f"{shown} is a binary file ({len(data):,} bytes); read_file only shows text "
                "(use bash, e.g. `xxd` or `file`, to inspect it)"
            )
        # Text in another encoding is still text: undecodable bytes show as U+FFFD.
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
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
        await commit_write(ctx, path, shown, before, after, planned_diff(shown, before, a.content))
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
        """Make the replacement (tolerantly, never ambiguously) and show the changed lines."""
        a = EditFileArgs.model_validate(args)
        if not a.old_str:
            raise ToolFailed(
                "old_str is empty; to create a file or replace all of it, use write_file"
            )
        if a.old_str == a.new_str:
            raise ToolFailed("old_str and new_str are the same; the edit would change nothing")
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        before = await asyncio.to_thread(read_for_edit, path, shown)
        check_fresh(ctx, shown, before)
        text = before.decode("utf-8")
        call: dict[str, object] = {"command": "str_replace", "path": shown}
        call |= {"old_str": a.old_str, "new_str": a.new_str, "replace_all": a.replace_all}
        try:
            after = apply_edit({shown: text}, [call], "str_replace")[shown]
        except EditError as error:
            raise ToolFailed(_edit_refusal(error, shown, a.old_str)) from None
        data = after.encode("utf-8")
        await commit_write(ctx, path, shown, before, data, planned_diff(shown, before, after))
        snippet = unified_diff(shown, text, after, max_lines=EDIT_DIFF_LINES)
        summary = f"Edited {shown}: replaced {_where(text, after, a.old_str)}."
        note = new_syntax_errors(shown, text, after)
        return ToolOutcome(content="\n\n".join(p for p in (summary, snippet, note) if p))


def _where(before: str, after: str, old: str) -> str:
    """Which lines changed: each occurrence for an exact replacement, else the first change."""
    count = before.count(old)
    if count >= 1:
        lines, at = [], before.find(old)
        while at != -1:
            lines.append(before.count("\n", 0, at) + 1)
            at = before.find(old, at + len(old))
        where = ", ".join(str(n) for n in lines)
        return f"1 occurrence (line {where})" if count == 1 else f"{count} (lines {where})"
    old_lines, new_lines = before.split("\n"), after.split("\n")
    first = next(
        (n for n, (x, y) in enumerate(zip(old_lines, new_lines, strict=False)) if x != y),
        min(len(old_lines), len(new_lines)),
    )
    return (
        f"1 occurrence (line {first + 1}; matched with differences tolerated, lines you kept "
        "stay as the file has them)"
    )


def _edit_refusal(error: EditError, shown: str, old: str) -> str:
    if isinstance(error, Ambiguous) and error.lines:
        at = ", ".join(str(n) for n in error.lines)
        return (
            f"old_str occurs {len(error.lines)} times in {shown} (at lines {at}); include more "
            "surrounding lines to pick one, or set replace_all to true to change them all"
        )
    if not isinstance(error, NoMatch):
        return error.message
    wanted = [line for line in old.split("\n") if line.strip()]
    if wanted and all(_NUMBERED.match(line) for line in wanted):
        return (
            f"old_str was not found in {shown}. It looks like old_str includes read_file's "
            "line numbers; leave them out."
        )
    if error.closest_line is None:
        return f"old_str was not found in {shown}. Read the file again and copy the exact text."
    shown_lines = "\n".join(
        f"{error.closest_line + k:>6}\t{line}" for k, line in enumerate(error.closest[:12])
    )
    return (
        f"old_str was not found in {shown}. Not even with whitespace, indentation, blank lines "
        f"and look-alike characters tolerated. The closest lines in the file, from line "
        f"{error.closest_line}:\n{shown_lines}\nHow old_str differs from them (- old_str, "
        f"+ the file):\n{error.diff}\nCopy the exact text from the file."
    )


def read_for_edit(path: Path, shown: str, tool: str = "edit_file") -> bytes:
    """The bytes of an existing text file an edit tool changes, or the refusal saying why not."""
    if path.is_dir():
        raise ToolFailed(f"{shown} is a directory, not a file")
    data = read_bytes_if_file(path)
    if data is None:
        raise ToolFailed(f"{shown} does not exist; use write_file to create it")
    if looks_binary(data):
        raise ToolFailed(f"{shown} is a binary file ({len(data):,} bytes); {tool} only edits text")
    return data


def planned_diff(shown: str, before: bytes | None, after: str) -> str:
    """The diff announced with a planned write (binary content is described, not diffed)."""
    if before is not None and looks_binary(before):
        return f"Binary file {shown} replaced by text ({len(after.encode('utf-8')):,} bytes)"
    old = None if before is None else before.decode("utf-8")
    return unified_diff(shown, old, after)


async def commit_write(
    ctx: ToolContext, path: Path, shown: str, before: bytes | None, after: bytes, diff: str
) -> None:
    """Announce the write through `ctx.before_write`, then replace the file atomically."""
    # The planned write is announced (and made durable by the loop) before the file changes.
    plan = PlannedWrite(
        path=shown,
        before_hash=sha256_hex(before),
        after_hash=sha256_hex(after),
        diff=diff,
        after=after,
    )
    await ctx.before_write(plan)
    before_landing(0)
    try:
        await asyncio.to_thread(write_atomically, path, after)
    except OSError as exc:
        raise ToolFailed(f"could not write {shown}: {exc.strerror or exc}") from exc
    ctx.read_hashes[shown] = sha256_hex(after) or ""


def check_fresh(ctx: ToolContext, shown: str, current: bytes) -> None:
    """Refuse to edit a file that changed since the model last read it, showing it afresh."""
    recorded = ctx.read_hashes.get(shown)
    if recorded is None or recorded == sha256_hex(current):
        return
    ctx.read_hashes[shown] = sha256_hex(current) or ""
    text = current.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    raise ToolFailed(
        f"{shown} changed since you last read it, so the edit was not made. Its current "
        f"content follows; base the edit on it.\n{number_lines(lines, 1, READ_DEFAULT_LIMIT)}"
    )


_NUMBERED = re.compile(r"^\s*\d+\t")


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"
