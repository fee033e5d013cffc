"""Which tools the model has, what it is told about them, and running a call it wrote."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from kestrel.protocol.messages import JSONValue, ToolCall, ToolSpec
from kestrel.tools.base import Tool, ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.code import (
    CodeIndex,
    FindReferences,
    FindSymbol,
    Outline,
    RepoMapTool,
    SearchCode,
)
from kestrel.tools.files import EditFile, ListFiles, ReadFile, WriteFile
from kestrel.tools.lazy_edit import LazyEdit
from kestrel.tools.patch import ApplyPatch
from kestrel.tools.search import Grep
from kestrel.tools.shell import Bash

logger = logging.getLogger(__name__)


def default_tools() -> list[Tool]:
    """The eight built-in tools, in the order the model is told about them."""
    return [
        ReadFile(),
        ListFiles(),
        Grep(),
        WriteFile(),
        EditFile(),
        LazyEdit(),
        ApplyPatch(),
        Bash(),
    ]


def code_tools(index: CodeIndex) -> list[Tool]:
    """The five code-intelligence tools, answering from `index`; offered on top of the defaults."""
    return [
        SearchCode(index),
        FindSymbol(index),
        FindReferences(index),
        Outline(),
        RepoMapTool(index),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidCall:
    """A call naming a known tool with arguments that validate."""

    tool: Tool
    args: BaseModel


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidCall:
    """A call that cannot run; `message` tells the model what to fix."""

    message: str


class ToolRegistry:
    """The tools offered to the model, looked up by name."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self._specs: tuple[ToolSpec, ...] | None = None

    def names(self) -> tuple[str, ...]:
        """The tool names, in registration order."""
        return tuple(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or `None`."""
        return self._tools.get(name)

    def kind(self, name: str) -> ToolKind | None:
        """Whether `name` reads, edits or executes; `None` for an unknown tool."""
        tool = self._tools.get(name)
        return None if tool is None else tool.kind

    def call_kind(self, call: ToolCall) -> ToolKind | None:
        """What this call may do: its tool's kind, unless the tool judges each call (a `task`
        call is a read when its subagent only reads, a command when it can change files)."""
        tool = self._tools.get(call.name)
        if tool is None:
            return None
        judge = getattr(tool, "kind_of_call", None)
        return tool.kind if judge is None else cast(ToolKind, judge(call))

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told: each tool's name, description and argument schema.

        Built once: schema generation costs milliseconds, and an unchanged list of tools keeps
        the provider's prompt cache valid.
        """
        if self._specs is not None:
            return self._specs
        specs = []
        for tool in self._tools.values():
            schema = clean_schema(tool.Args.model_json_schema())
            # The Args docstring is for readers of the code; the model has the tool description.
            schema.pop("description", None)
            spec = ToolSpec(name=tool.name, description=tool.description, input_schema=schema)
            specs.append(spec)
        self._specs = tuple(specs)
        return self._specs

    def validate(self, call: ToolCall) -> ValidCall | InvalidCall:
        """Check a call without running it: the tool exists and its arguments fit."""
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return InvalidCall(message=f"unknown tool {call.name!r}; available tools: {available}")
        try:
            raw = call.parsed_arguments()
        except json.JSONDecodeError as exc:
            return InvalidCall(
                message=f"arguments for {call.name} are not valid JSON ({exc.msg} at line "
                f"{exc.lineno} column {exc.colno}); send one JSON object"
            )
        except ValueError as exc:
            return InvalidCall(message=f"arguments for {call.name}: {exc}")
        # Some providers send null for every optional argument left out; that means the default.
        fields = tool.Args.model_fields
        given = {
            key: value
            for key, value in raw.items()
            if value is not None or key not in fields or fields[key].is_required()
        }
        try:
            args = tool.Args.model_validate(given)
        except ValidationError as exc:
            return InvalidCall(message=describe_errors(call.name, exc.errors()))
        return ValidCall(tool=tool, args=args)

    async def dispatch(self, call: ToolCall, ctx: ToolContext) -> ToolOutcome:
        """Run one call; the model's mistakes and tool failures come back as error outcomes.

        Cancellation propagates; so does anything that is not an `Exception`.
        """
        checked = self.validate(call)
        if isinstance(checked, InvalidCall):
            return ToolOutcome(content=checked.message, is_error=True)
        try:
            return await checked.tool.run(checked.args, ctx)
        except ToolFailed as exc:
            return ToolOutcome(content=str(exc), is_error=True)
        except Exception as exc:
            logger.debug("tool %s raised", call.name, exc_info=True)
            return ToolOutcome(
                content=f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}",
                is_error=True,
            )


def describe_errors(tool: str, errors: Sequence[ErrorDetails]) -> str:
    """One readable line per bad argument, from pydantic's validation errors."""
    lines = [f"invalid arguments for {tool}:"]
    for error in errors:
        field = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        if error["type"] == "missing":
            lines.append(f"- {field}: missing (required)")
        elif error["type"] == "extra_forbidden":
            lines.append(f"- {field}: unknown argument")
        else:
            given = json.dumps(error.get("input"), default=str)
            given = given if len(given) <= 60 else given[:57] + "..."
            lines.append(f"- {field}: {error['msg']} (got {given})")
    return "\n".join(lines)


def clean_schema(schema: dict[str, Any]) -> dict[str, JSONValue]:
    """The JSON Schema without pydantic's titles; optional fields read as their plain type."""
    cleaned = {key: value for key, value in schema.items() if key != "title"}
    properties = cleaned.get("properties")
    if isinstance(properties, dict):
        cleaned["properties"] = {name: _clean_property(prop) for name, prop in properties.items()}
    return cleaned


def _clean_property(prop: dict[str, Any]) -> dict[str, Any]:
    cleaned = clean_schema(prop)
    options = cleaned.get("anyOf")
    # `X | None = None` means "leave it out"; the model needs only X.
    if isinstance(options, list) and {"type": "null"} in options and cleaned.get("default") is None:
        rest = [option for option in options if option != {"type": "null"}]
        if len(rest) == 1:
            cleaned.pop("anyOf")
            cleaned.pop("default", None)
            cleaned = {**rest[0], **cleaned}
    return cleaned
