"""The tools the model calls, and the registry that runs its calls."""

from kestrel.tools.base import (
    PlannedWrite,
    Tool,
    ToolContext,
    ToolFailed,
    ToolKind,
    ToolOutcome,
)
from kestrel.tools.files import EditFile, ListFiles, ReadFile, WriteFile
from kestrel.tools.lazy_edit import LazyEdit
from kestrel.tools.registry import InvalidCall, ToolRegistry, ValidCall, default_tools
from kestrel.tools.search import Grep
from kestrel.tools.shell import Bash

__all__ = [
    "Bash",
    "EditFile",
    "Grep",
    "InvalidCall",
    "LazyEdit",
    "ListFiles",
    "PlannedWrite",
    "ReadFile",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolKind",
    "ToolOutcome",
    "ToolRegistry",
    "ValidCall",
    "WriteFile",
    "default_tools",
]
