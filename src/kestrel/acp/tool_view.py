"""How one of Kestrel's tool calls looks in an editor: its kind, title, the files it touches,
and a change as the protocol's diff content (old and new text)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.schema import FileEditToolCallContent, ToolCallLocation, ToolKind

from kestrel.protocol.events import ToolKind as KestrelToolKind

KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "outline": "read",
    "repo_map": "read",
    "list_files": "search",
    "grep": "search",
    "search_code": "search",
    "find_symbol": "search",
    "find_references": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "lazy_edit": "edit",
    "apply_patch": "edit",
    "bash": "execute",
    "verify": "execute",
    "todo": "think",
    "propose_plan": "think",
    "task": "think",
}
"""The protocol's kind of each built-in tool; other tools (MCP ones) go by Kestrel's kind."""

_BY_KESTREL_KIND: dict[KestrelToolKind, ToolKind] = {
    "read": "read",
    "edit": "edit",
    "execute": "execute",
}
TITLE_CHARS = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolView:
    """What an editor shows of a call before it runs."""

    kind: ToolKind
    title: str
    locations: list[ToolCallLocation]
    raw_input: dict[str, Any]


def arguments_of(text: str) -> dict[str, Any]:
    """A call's arguments; `{}` when the model wrote something that is not a JSON object."""
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def view_of(name: str, arguments: str, cwd: Path, kind: KestrelToolKind | None = None) -> ToolView:
    """The kind, title and locations of a call to `name` with `arguments` (JSON text)."""
    args = arguments_of(arguments)
    acp_kind = KINDS.get(name) or (_BY_KESTREL_KIND[kind] if kind else "other")
    path = args.get("path")
    locations: list[ToolCallLocation] = []
    if isinstance(path, str) and path:
        offset = args.get("offset")
        line = offset if isinstance(offset, int) and offset > 0 else None
        locations.append(ToolCallLocation(path=str(cwd / path), line=line))
    return ToolView(kind=acp_kind, title=_title(name, args), locations=locations, raw_input=args)


def _title(name: str, args: dict[str, Any]) -> str:
    path = args.get("path")
    where = path if isinstance(path, str) and path else "."
    match name:
        case "read_file":
            title = f"Read {where}"
        case "list_files":
            title = f"List {where}"
        case "grep":
            title = f"Search for `{args.get('pattern', '')}` in {where}"
        case "write_file":
            title = f"Write {where}"
        case "edit_file" | "lazy_edit":
            title = f"Edit {where}"
        case "apply_patch":
            title = "Apply a patch"
        case "bash":
            title = f"`{args.get('command', '')}`"
        case "search_code":
            title = f"Search the code for {args.get('query', '')!r}"
        case "find_symbol" | "find_references":
            title = f"{name.replace('_', ' ').capitalize()} `{args.get('name', '')}`"
        case "todo":
            title = "Update the task list"
        case "propose_plan":
            title = "Propose a plan"
        case "task":
            title = f"Subagent: {args.get('description') or args.get('agent') or 'task'}"
        case _:
            title = name
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def diff_contents(
    path: str, diff: str, cwd: Path, *, new_file: bool, deleted: bool
) -> list[FileEditToolCallContent]:
    """A file's unified diff as diff content, one per hunk (the hunk's old and new lines);
    a new file has no old text. Nothing for a diff without hunks (a binary file)."""
    where = str(cwd / path)
    contents: list[FileEditToolCallContent] = []
    for old, new in _hunks(diff):
        contents.append(
            FileEditToolCallContent(
                type="diff",
                path=where,
                old_text=None if new_file else old,
                new_text="" if deleted else new,
            )
        )
    return contents


def _hunks(diff: str) -> list[tuple[str, str]]:
    """The old and new side of each hunk of a unified diff."""
    hunks: list[tuple[list[str], list[str]]] = []
    for line in diff.splitlines():
        if line.startswith("@@"):
            hunks.append(([], []))
            continue
        if not hunks or line.startswith("\\"):
            continue  # File headers; "\ No newline at end of file".
        old, new = hunks[-1]
        marker, text = line[:1], line[1:]
        if marker in (" ", "-"):
            old.append(text)
        if marker in (" ", "+"):
            new.append(text)
    return [(_joined(old), _joined(new)) for old, new in hunks]


def _joined(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)
