"""`apply_edit`: the edit engine's exact edit of one file, as an MCP tool."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.files import EditFile, EditFileArgs
from kestrel.tools.paths import display_path, resolve_path


class ApplyEditArgs(BaseModel):
    """Arguments of `apply_edit`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="The file to edit, relative to the repository root.")
    old_str: str = Field(
        description="The text to replace, exactly as it is in the file (indentation "
        "included); it must occur once unless replace_all is true."
    )
    new_str: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence of old_str.")


class ApplyEditTool:
    """Replace a piece of text in a file of the repository."""

    name: ClassVar[str] = "apply_edit"
    kind: ClassVar[ToolKind] = "edit"
    Args: ClassVar[type[BaseModel]] = ApplyEditArgs
    description: ClassVar[str] = (
        "Replace text in an existing file of this repository with Kestrel's edit engine. "
        "old_str should match the file exactly and occur once (or set replace_all); when it "
        "does not match exactly, it is matched again tolerating trailing whitespace, an "
        "indentation offset, look-alike characters and missing blank lines, and applied only "
        "if exactly one place fits. No match, or several, is an error that shows the closest "
        "lines or the candidate line numbers. The file is rewritten atomically, keeping its "
        "line endings; the result shows the diff. Paths must stay inside the repository (no "
        "`..` escapes, no absolute paths or symlinks leading out, nothing under .git); files "
        "are not created or deleted."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Check the path, then make the replacement through the edit engine."""
        a = ApplyEditArgs.model_validate(args)
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        if ".git" in PurePosixPath(shown).parts:
            raise ToolFailed(
                f"{shown} is inside .git; apply_edit only edits the repository's files"
            )
        if not a.old_str:
            raise ToolFailed(
                "old_str is empty; give the exact text to replace (apply_edit changes text in "
                "an existing file, it does not create or overwrite files)"
            )
        if path.is_dir():
            raise ToolFailed(f"{shown} is a directory; give the path of a file")
        if not path.exists():
            raise ToolFailed(
                f"{shown} does not exist; apply_edit only changes existing files (use search "
                "or map to find the right path)"
            )
        edit = EditFileArgs(
            path=shown, old_str=a.old_str, new_str=a.new_str, replace_all=a.replace_all
        )
        return await EditFile().run(edit, ctx)
