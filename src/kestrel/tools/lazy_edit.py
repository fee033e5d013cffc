"""The `lazy_edit` tool: rewrite a region of a file, eliding unchanged code with marker comments."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.edits import EditError, apply_edit
from kestrel.edits.syntax import new_syntax_errors
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.files import (
    EDIT_DIFF_LINES,
    check_fresh,
    commit_write,
    planned_diff,
    read_for_edit,
)
from kestrel.tools.paths import (
    display_path,
    resolve_path,
    unified_diff,
)


class LazyEditArgs(BaseModel):
    """Arguments of `lazy_edit`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Existing file to edit, relative to the workspace root.")
    content: str = Field(
        description="The new text of the region (or whole file), with unchanged code left out "
        "behind elision comment lines such as `# ... existing code ...`."
    )


class LazyEdit:
    """Rewrite a region of a file, eliding the unchanged parts."""

    name: ClassVar[str] = "lazy_edit"
    kind: ClassVar[ToolKind] = "edit"
    Args: ClassVar[type[BaseModel]] = LazyEditArgs
    description: ClassVar[str] = (
        "Rewrite a large region of an existing file by giving its new text, with unchanged code "
        "left out behind elision comments on lines of their own (`# ... existing code ...`, "
        "`// ... existing code ...`). For small changes use edit_file. The lines next to each "
        "elision must be copied unchanged from the file; start (end) with an elision unless you "
        "start at the first (end at the last) line. Code you leave out without an elision is "
        "deleted. An edit that cannot be placed exactly is not applied."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Merge the edit into the file (or refuse it), announce the write, then make it."""
        a = LazyEditArgs.model_validate(args)
        path = resolve_path(ctx.root, a.path)
        shown = display_path(ctx.root, path)
        before = await asyncio.to_thread(read_for_edit, path, shown, "lazy_edit")
        check_fresh(ctx, shown, before)
        text = before.decode("utf-8")
        try:
            after = apply_edit({shown: text}, {"path": shown, "content": a.content}, "lazy")
        except EditError as error:
            raise ToolFailed(f"the edit was not applied: {error.message}") from None
        new = after[shown]
        if new == text:
            return ToolOutcome(content=f"The edit leaves {shown} unchanged; nothing was written.")
        data = new.encode("utf-8")
        await commit_write(ctx, path, shown, before, data, planned_diff(shown, before, new))
        snippet = unified_diff(shown, text, new, max_lines=EDIT_DIFF_LINES)
        note = new_syntax_errors(shown, text, new)
        summary = f"Edited {shown}: merged the lazy edit."
        return ToolOutcome(content="\n\n".join(p for p in (summary, snippet, note) if p))
