"""Tool calls described for policy: which paths, command or URL a call touches, and how hooks
written for Claude Code see it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kestrel.edits import EditError, Move, parse_edit
from kestrel.policy.subject import CallSubject
from kestrel.protocol.events import ToolKind
from kestrel.protocol.messages import ToolCall

COMPAT_NAMES: Mapping[str, str] = {
    "bash": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "lazy_edit": "Edit",
    "grep": "Grep",
    "list_files": "LS",
}
"""Claude Code's name for each Kestrel tool that has a counterpart there."""
_COMPAT_KEYS: Mapping[str, Mapping[str, str]] = {
    "read_file": {"path": "file_path"},
    "write_file": {"path": "file_path"},
    "edit_file": {"path": "file_path", "old_str": "old_string", "new_str": "new_string"},
    "lazy_edit": {"path": "file_path", "content": "new_string"},
}
"""Argument names that differ from Claude Code's, per tool: Kestrel's name to Claude Code's."""
_PATH_ARGS = ("path",)


def describe_call(call: ToolCall, kind: ToolKind | None, root: Path) -> CallSubject:
    """What policy needs to know about `call`; arguments that do not parse describe nothing."""
    try:
        arguments = call.parsed_arguments()
    except ValueError:
        arguments = {}
    return subject_from(call.name, kind, arguments, root)


def subject_from(
    name: str, kind: ToolKind | None, arguments: Mapping[str, Any], root: Path
) -> CallSubject:
    """The subject of a call to tool `name` with `arguments` (Kestrel's names)."""
    paths: list[str] = []
    command = url = None
    if name == "apply_patch":
        paths = _patch_paths(arguments.get("patch"))
    elif name == "bash":
        raw = arguments.get("command")
        command = raw if isinstance(raw, str) else ""
    else:
        for key in _PATH_ARGS:
            value = arguments.get(key)
            if isinstance(value, str):
                paths.append(value)
        if name in ("list_files", "grep") and not paths:
            paths.append(".")
    value = arguments.get("url")
    if isinstance(value, str):
        url = value
    alias = COMPAT_NAMES.get(name)
    return CallSubject(
        tool=name,
        kind=kind,
        root=root,
        aliases=(alias,) if alias else (),
        paths=tuple(paths),
        command=command,
        url=url,
        arguments=dict(arguments),
    )


def hook_input(subject: CallSubject) -> tuple[str, dict[str, Any]]:
    """The tool name and input a hook is given, in Claude Code's terms where they differ.

    Paths are given absolute, as Claude Code gives them; Kestrel's own argument names are kept
    too, so hooks written for Kestrel see them.
    """
    name = COMPAT_NAMES.get(subject.tool, subject.tool)
    given = dict(subject.arguments)
    for ours, theirs in _COMPAT_KEYS.get(subject.tool, {}).items():
        if ours in given:
            value = given[ours]
            if ours == "path" and isinstance(value, str):
                value = str(Path(subject.root, value)) if not Path(value).is_absolute() else value
            given[theirs] = value
    return name, given


def from_hook_input(subject: CallSubject, updated: Mapping[str, Any]) -> CallSubject:
    """The call with a hook's `updatedInput` applied, in Kestrel's argument names.

    Keys in Claude Code's spelling are translated; keys the tool does not take are dropped
    later by validation with a clear error. Raises `ValueError` for input that is not an object.
    """
    if not isinstance(updated, Mapping):
        raise ValueError("updatedInput must be a JSON object")
    renames = {theirs: ours for ours, theirs in _COMPAT_KEYS.get(subject.tool, {}).items()}
    merged = dict(subject.arguments)
    for key, value in updated.items():
        ours = renames.get(key, key)
        if ours == "path" and isinstance(value, str) and Path(value).is_relative_to(subject.root):
            value = Path(value).relative_to(subject.root).as_posix() or "."
        merged[ours] = value
    # Both spellings came in from `hook_input`; keep only Kestrel's.
    for theirs in renames:
        merged.pop(theirs, None)
    return subject_from(subject.tool, subject.kind, merged, subject.root)


def _patch_paths(patch: object) -> list[str]:
    if not isinstance(patch, str):
        return []
    try:
        steps = parse_edit({}, patch, "apply_patch")
    except EditError:
        return []
    paths = [step.path for step in steps]
    paths += [step.to for step in steps if isinstance(step, Move)]
    return list(dict.fromkeys(paths))
