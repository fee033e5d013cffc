"""The `todo` tool: the model keeps the session's task list, writing the whole list each call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.protocol.events import TodoItem, TodoStatus, TodoUpdated
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome

MAX_ITEMS = 100
MAX_ID_CHARS = 40
MAX_TEXT_CHARS = 500


class TodoEntry(BaseModel):
    """One item of the list, as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Short id, unique in the list."
    )
    text: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, description="What to do, in one line."
    )
    status: TodoStatus = Field(
        default="pending", description="pending, in_progress (at most one item) or done."
    )


class TodoArgs(BaseModel):
    """Arguments of `todo`."""

    model_config = ConfigDict(extra="forbid")

    items: list[TodoEntry] = Field(
        max_length=MAX_ITEMS,
        description="The whole task list, in order; it replaces the previous list.",
    )


def todo_problems(items: Sequence[TodoItem]) -> list[str]:
    """What is wrong with a task list, one sentence each; empty when it is well formed."""
    problems: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not item.id:
            problems.append("an item has a blank id")
        elif item.id in seen:
            problems.append(f"id {item.id!r} is used by more than one item; ids must be unique")
        seen.add(item.id)
        if not item.text:
            problems.append(f"item {item.id!r} has a blank text")
    working = [item.id for item in items if item.status == "in_progress"]
    if len(working) > 1:
        shown = ", ".join(repr(i) for i in working)
        problems.append(
            f"{len(working)} items are in_progress ({shown}); at most one may be: "
            "finish one (done) before starting the next"
        )
    return problems


def todo_summary(items: Sequence[TodoItem]) -> str:
    """Counts by status, e.g. `3 items: 1 done, 1 in progress, 1 pending`."""
    if not items:
        return "the task list is empty"
    counts = {s: sum(1 for i in items if i.status == s) for s in ("done", "in_progress", "pending")}
    parts = [f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n]
    noun = "item" if len(items) == 1 else "items"
    return f"{len(items)} {noun}: {', '.join(parts)}"


class Todo:
    """Replace the session's task list with the list the model writes."""

    name: ClassVar[str] = "todo"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = TodoArgs
    description: ClassVar[str] = (
        "Keep the task list for this session: send the whole list every time (it replaces the "
        "previous one), each item with an id, a one-line text and a status: pending, "
        "in_progress or done. Keep at most one item in_progress; mark it done as soon as it is "
        "finished. Use it for work of several steps; the current list is shown to you in every "
        "step."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Check the list and record it for the session."""
        a = TodoArgs.model_validate(args)
        items = tuple(
            TodoItem(id=e.id.strip(), text=" ".join(e.text.split()), status=e.status)
            for e in a.items
        )
        problems = todo_problems(items)
        if problems:
            raise ToolFailed(
                "the task list was not changed:\n"
                + "\n".join(f"- {p}" for p in problems)
                + "\nSend the whole corrected list again."
            )
        return ToolOutcome(
            content=f"Task list updated ({todo_summary(items)}).",
            events=(TodoUpdated(items=items, source="model", call_id=ctx.call_id or None),),
        )
