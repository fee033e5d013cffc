"""The edit engine: land a model's edit exactly, in any format it writes, or refuse with a reason.

`apply_edit(files, edit, fmt)` is pure: it maps paths to their current text and returns the
complete new set (a missing path is a deleted file), or raises an `EditError` subclass whose
message is written for the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from kestrel.edits.errors import (
    Ambiguous,
    BlockFailure,
    EditError,
    EditRejected,
    FileExists,
    FileMissing,
    MalformedEdit,
    NoMatch,
)
from kestrel.edits.formats.apply_patch import parse_apply_patch
from kestrel.edits.formats.lazy import parse_lazy
from kestrel.edits.formats.search_replace import parse_search_replace
from kestrel.edits.formats.str_replace import parse_str_replace
from kestrel.edits.formats.udiff import parse_udiff
from kestrel.edits.model import Create, Delete, Hunk, Move, Replace, Step, Update
from kestrel.edits.steps import apply_steps

__all__ = [
    "FORMATS",
    "Ambiguous",
    "BlockFailure",
    "Create",
    "Delete",
    "EditError",
    "EditFormat",
    "EditRejected",
    "FileExists",
    "FileMissing",
    "Hunk",
    "MalformedEdit",
    "Move",
    "NoMatch",
    "Replace",
    "Step",
    "Update",
    "apply_edit",
    "apply_steps",
    "parse_edit",
]

EditFormat = Literal["str_replace", "apply_patch", "search_replace", "udiff", "lazy"]
FORMATS: tuple[str, ...] = get_args(EditFormat)


def parse_edit(files: Mapping[str, str], edit: object, fmt: str) -> list[Step]:
    """The steps an edit asks for; raises `MalformedEdit` when it does not follow `fmt`."""
    if fmt == "str_replace":
        return parse_str_replace(edit)
    if fmt == "lazy":
        return parse_lazy(edit, files)
    if not isinstance(edit, str):
        raise MalformedEdit(f"a {fmt} edit is text, got {type(edit).__name__}")
    if fmt == "apply_patch":
        return parse_apply_patch(edit)
    if fmt == "search_replace":
        return parse_search_replace(edit, files)
    if fmt == "udiff":
        return parse_udiff(edit)
    raise MalformedEdit(f"unknown edit format {fmt!r}; known: {', '.join(FORMATS)}")


def apply_edit(files: Mapping[str, str], edit: object, fmt: str) -> dict[str, str]:
    """The complete file set after `edit`, or an `EditError` if any part of it cannot land."""
    return apply_steps(files, parse_edit(files, edit, fmt))
