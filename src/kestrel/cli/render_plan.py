"""How the terminal shows the task list and plans: plain lines, so any frontend can reuse them."""

from __future__ import annotations

from collections.abc import Sequence

from kestrel.protocol.events import PlanDecided, PlanProposed, TodoItem, TodoUpdated

MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}


def todo_lines(event: TodoUpdated) -> list[str]:
    """The task list, one line per item with its status mark."""
    origin = "from the approved plan" if event.source == "plan" else "updated"
    if not event.items:
        return [f"task list {origin}: empty"]
    return [f"task list {origin}:", *_items(event.items)]


def _items(items: Sequence[TodoItem]) -> list[str]:
    return [f"  {MARKS[item.status]} {item.id}: {item.text}" for item in items]


def plan_lines(event: PlanProposed | PlanDecided) -> list[str]:
    """A proposed plan in full, or what the person decided about one."""
    if isinstance(event, PlanProposed):
        from kestrel.tools.plan import plan_text  # The tools package is heavy to import.

        body = plan_text(event.summary, event.steps).splitlines()
        return [f"plan {event.plan_id} proposed:", *(f"  {line}" for line in body)]
    if event.decision == "rejected":
        return [f"plan {event.plan_id} rejected: {event.reason}"]
    edited = " (edited)" if event.edited else ""
    mode = f"; continuing in {event.permission_mode} mode" if event.permission_mode else ""
    return [f"plan {event.plan_id} approved{edited}{mode}"]
