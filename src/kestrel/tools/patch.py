"""The `apply_patch` tool: a multi-file V4A patch, checked whole, announced, then written."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.edits import EditError, Move, apply_steps, parse_edit
from kestrel.edits.syntax import new_syntax_errors
from kestrel.tools.base import PlannedWrite, ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.crash_hook import before_landing
from kestrel.tools.files import check_fresh, planned_diff
from kestrel.tools.paths import (
    display_path,
    looks_binary,
    read_bytes_if_file,
    resolve_path,
    sha256_hex,
    unified_diff,
    write_atomically,
)

PATCH_DIFF_LINES = 60
"""Most diff lines shown back to the model for the whole patch."""


class ApplyPatchArgs(BaseModel):
    """Arguments of `apply_patch`."""

    model_config = ConfigDict(extra="forbid")

    patch: str = Field(
        description="The patch, from `*** Begin Patch` to `*** End Patch` (V4A format)."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Change:
    path: Path
    shown: str
    before: bytes | None
    after: bytes | None


class ApplyPatch:
    """Add, update, move and delete files with one patch; all of it lands or none of it."""

    name: ClassVar[str] = "apply_patch"
    kind: ClassVar[ToolKind] = "edit"
    Args: ClassVar[type[BaseModel]] = ApplyPatchArgs
    description: ClassVar[str] = (
        "Change several files at once with a patch:\n"
        "*** Begin Patch\n*** Update File: path\n@@ optional line above the change\n"
        " context line\n-removed line\n+added line\n*** Add File: new/path\n+content\n"
        "*** Delete File: old/path\n*** End Patch\n"
        "`*** Move to: path` after an Update line renames the file. Give about three unchanged "
        "lines around each change; `...` may stand for unchanged lines. The patch is checked "
        "as a whole: if any part does not match exactly one place, nothing is written."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Apply the whole patch or refuse it, announcing every write before it lands."""
        a = ApplyPatchArgs.model_validate(args)
        try:
            steps = parse_edit({}, a.patch, "apply_patch")
        except EditError as error:
            raise ToolFailed(f"the patch could not be read: {error.message}") from None
        paths = {step.path for step in steps} | {s.to for s in steps if isinstance(s, Move)}
        where = {raw: resolve_path(ctx.root, raw) for raw in sorted(paths)}
        current = await asyncio.to_thread(_read_all, ctx, where)
        files = {raw: data.decode("utf-8") for raw, data in current.items() if data is not None}
        try:
            result = apply_steps(files, steps)
        except EditError as error:
            raise ToolFailed(f"the patch was not applied: {error.message}") from None
        changes = [
            _Change(
                path=where[raw],
                shown=display_path(ctx.root, where[raw]),
                before=current[raw],
                after=None if raw not in result else result[raw].encode("utf-8"),
            )
            for raw in where
            if files.get(raw) != result.get(raw)
        ]
        if not changes:
            return ToolOutcome(content="The patch changes nothing; no file was written.")
        for change in changes:
            await ctx.before_write(_plan(change))
        for index, change in enumerate(changes):
            before_landing(index)
            await asyncio.to_thread(_write, change)
            if change.after is not None:
                ctx.read_hashes[change.shown] = sha256_hex(change.after) or ""
        return ToolOutcome(content=_summary(changes))


def _read_all(ctx: ToolContext, where: dict[str, Path]) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for raw, path in where.items():
        shown = display_path(ctx.root, path)
        if path.is_dir():
            raise ToolFailed(f"{shown} is a directory, not a file")
        data = read_bytes_if_file(path)
        if data is not None:
            if looks_binary(data):
                raise ToolFailed(
                    f"{shown} is a binary file ({len(data):,} bytes); apply_patch only edits text"
                )
            check_fresh(ctx, shown, data)
        out[raw] = data
    return out


def _plan(change: _Change) -> PlannedWrite:
    after_text = "" if change.after is None else change.after.decode("utf-8")
    return PlannedWrite(
        path=change.shown,
        before_hash=sha256_hex(change.before),
        after_hash=sha256_hex(change.after),
        diff=planned_diff(change.shown, change.before, after_text),
        after=change.after,
    )


def _write(change: _Change) -> None:
    try:
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            write_atomically(change.path, change.after)
    except OSError as exc:
        raise ToolFailed(f"could not write {change.shown}: {exc.strerror or exc}") from exc


def _summary(changes: list[_Change]) -> str:
    verbs = []
    diffs = []
    notes = []
    for change in changes:
        before = None if change.before is None else change.before.decode("utf-8")
        if change.after is None:
            verbs.append(f"deleted {change.shown}")
            continue
        after = change.after.decode("utf-8")
        verbs.append(f"{'added' if before is None else 'updated'} {change.shown}")
        diffs.append(unified_diff(change.shown, before, after, max_lines=PATCH_DIFF_LINES))
        note = new_syntax_errors(change.shown, before, after)
        if note:
            notes.append(note)
    head = f"Applied the patch: {', '.join(verbs)}."
    body = "\n".join(diffs)
    cut = body.split("\n")
    if len(cut) > PATCH_DIFF_LINES:
        body = "\n".join([*cut[:PATCH_DIFF_LINES], f"[... {len(cut) - PATCH_DIFF_LINES} more]"])
    return "\n\n".join(part for part in (head, body, *notes) if part)
