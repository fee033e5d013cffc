"""Anthropic-style `str_replace_based_edit_tool` calls: str_replace, create and insert."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kestrel.edits.errors import MalformedEdit
from kestrel.edits.model import Create, Hunk, Replace, Step, Update


def parse_str_replace(edit: object) -> list[Step]:
    """Steps from one call or a list of calls (dicts, or their JSON text)."""
    if isinstance(edit, str):
        try:
            edit = json.loads(edit)
        except json.JSONDecodeError as exc:
            raise MalformedEdit(
                f"str_replace edits are JSON objects; this is not JSON ({exc.msg})"
            ) from exc
    calls = [edit] if isinstance(edit, Mapping) else edit
    if not isinstance(calls, list) or not calls:
        raise MalformedEdit("a str_replace edit is a call object or a non-empty list of them")
    return [_step(call, n) for n, call in enumerate(calls, 1)]


def _step(call: Any, number: int) -> Step:
    if not isinstance(call, Mapping):
        raise MalformedEdit(f"call {number} is not an object")
    command = call.get("command", "str_replace")
    path = _text(call, "path", number)
    if command == "str_replace":
        return Replace(
            path=path,
            old=_text(call, "old_str", number),
            new=_text(call, "new_str", number, default=""),
            replace_all=bool(call.get("replace_all", False)),
        )
    if command == "create":
        return Create(path=path, content=_text(call, "file_text", number), overwrite=True)
    if command == "insert":
        line = call.get("insert_line")
        if not isinstance(line, int) or isinstance(line, bool) or line < 0:
            raise MalformedEdit(f"call {number}: insert_line must be a line number (0 = top)")
        text = _text(call, "new_str", number)
        new = tuple(text.removesuffix("\n").split("\n"))
        return Update(path=path, hunk=Hunk(old=(), new=new, hint=line))
    raise MalformedEdit(
        f"call {number}: unknown command {command!r}; use str_replace, create or insert"
    )


def _text(call: Mapping[str, Any], key: str, number: int, default: str | None = None) -> str:
    value = call.get(key, default)
    if not isinstance(value, str):
        raise MalformedEdit(f"call {number}: {key} must be a string")
    return value
