"""The registry: what the model is told, and every way a call can be wrong."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from kestrel.protocol.messages import ToolCall
from kestrel.tools import (
    InvalidCall,
    ToolContext,
    ToolFailed,
    ToolKind,
    ToolOutcome,
    ToolRegistry,
    ValidCall,
    default_tools,
)

CONTRACT = {
    "read_file": ("read", {"path", "offset", "limit"}, {"path"}),
    "list_files": ("read", {"path", "pattern"}, set()),
    "grep": (
        "read",
        {"pattern", "path", "glob", "case_insensitive", "context", "max_results"},
        {"pattern"},
    ),
    "write_file": ("edit", {"path", "content"}, {"path", "content"}),
    "edit_file": (
        "edit",
        {"path", "old_str", "new_str", "replace_all"},
        {"path", "old_str", "new_str"},
    ),
    "lazy_edit": ("edit", {"path", "content"}, {"path", "content"}),
    "apply_patch": ("edit", {"patch"}, {"patch"}),
    "bash": ("execute", {"command", "timeout"}, {"command"}),
}


def test_the_built_in_tools_keep_their_public_names_kinds_and_arguments():
    registry = ToolRegistry(default_tools())
    specs = registry.specs()
    assert [spec.name for spec in specs] == list(CONTRACT)
    for spec in specs:
        kind, arguments, required = CONTRACT[spec.name]
        assert registry.kind(spec.name) == kind
        schema = spec.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == arguments
        assert set(schema.get("required", [])) == required
        assert spec.description.strip()
        for prop in schema["properties"].values():
            assert "title" not in prop
            assert prop["description"]
            assert "anyOf" not in prop
        assert "title" not in schema and "description" not in schema


def test_optional_arguments_read_as_their_plain_type():
    [grep] = [spec for spec in ToolRegistry(default_tools()).specs() if spec.name == "grep"]
    assert grep.input_schema["properties"]["glob"]["type"] == "string"
    assert grep.input_schema["properties"]["max_results"]["default"] == 100


def test_lookups():
    registry = ToolRegistry(default_tools())
    assert registry.kind("nope") is None
    assert registry.get("nope") is None
    assert registry.get("bash") is not None
    assert registry.names() == tuple(CONTRACT)


def test_two_tools_with_one_name_are_refused():
    with pytest.raises(ValueError, match="read_file"):
        ToolRegistry([*default_tools(), *default_tools()[:1]])


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c", name=name, arguments=arguments)


@pytest.fixture
def registry(ws):
    return ws.registry


async def test_an_unknown_tool_lists_the_available_ones(ws):
    outcome = await ws.registry.dispatch(call("delete_all", "{}"), ws.context())
    assert outcome.is_error
    assert outcome.content == (
        "unknown tool 'delete_all'; available tools: "
        "read_file, list_files, grep, write_file, edit_file, lazy_edit, apply_patch, bash"
    )


async def test_bad_json_is_explained(ws):
    outcome = await ws.registry.dispatch(call("read_file", '{"path": '), ws.context())
    assert outcome.is_error
    assert outcome.content.startswith("arguments for read_file are not valid JSON (")


async def test_arguments_must_be_an_object(ws):
    outcome = await ws.registry.dispatch(call("read_file", '["a.py"]'), ws.context())
    assert outcome.is_error
    assert "arguments must be a JSON object, got list" in outcome.content


async def test_empty_arguments_mean_none_given(ws):
    outcome = await ws.registry.dispatch(call("read_file", ""), ws.context())
    assert outcome.content == "invalid arguments for read_file:\n- path: missing (required)"


async def test_each_bad_field_is_named(ws):
    outcome = await ws.registry.dispatch(
        call("read_file", '{"offset": "soon", "limt": 5}'), ws.context()
    )
    assert outcome.is_error
    assert outcome.content.splitlines() == [
        "invalid arguments for read_file:",
        "- path: missing (required)",
        "- offset: Input should be a valid integer, unable to parse string as an integer "
        '(got "soon")',
        "- limt: unknown argument",
    ]


async def test_a_wrong_type_is_named(ws):
    outcome = await ws.call("write_file", path="a.txt", content=42)
    assert outcome.is_error
    assert outcome.content == (
        "invalid arguments for write_file:\n- content: Input should be a valid string (got 42)"
    )


async def test_null_for_an_optional_argument_means_its_default(ws):
    ws.write("a.txt", "one\ntwo\n")
    arguments = '{"path": "a.txt", "offset": null, "limit": null}'
    outcome = await ws.registry.dispatch(call("read_file", arguments), ws.context())
    assert outcome == ToolOutcome(content="     1\tone\n     2\ttwo")
    outcome = await ws.registry.dispatch(call("read_file", '{"path": null}'), ws.context())
    assert outcome.content.splitlines()[1].startswith("- path: Input should be a valid string")


def test_validate_checks_without_running(registry):
    checked = registry.validate(call("bash", '{"command": "rm -rf /"}'))
    assert isinstance(checked, ValidCall)
    assert checked.tool.kind == "execute"
    assert checked.args.model_dump() == {"command": "rm -rf /", "timeout": None}
    assert isinstance(registry.validate(call("bash", "{}")), InvalidCall)


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Raising:
    """A tool that raises whatever it was built with."""

    name: ClassVar[str] = "raising"
    description: ClassVar[str] = "Raises."
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = NoArgs

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        raise self.error


async def test_tool_failures_become_error_outcomes(ws):
    registry = ToolRegistry([Raising(ToolFailed("no such branch"))])
    outcome = await registry.dispatch(call("raising", "{}"), ws.context())
    assert outcome == ToolOutcome(content="no such branch", is_error=True)


async def test_unexpected_exceptions_become_error_outcomes_naming_the_type(ws):
    registry = ToolRegistry([Raising(PermissionError(13, "Permission denied"))])
    outcome = await registry.dispatch(call("raising", "{}"), ws.context())
    assert outcome.is_error
    assert outcome.content == (
        "raising failed unexpectedly: PermissionError: [Errno 13] Permission denied"
    )


async def test_cancellation_propagates(ws):
    registry = ToolRegistry([Raising(asyncio.CancelledError())])
    with pytest.raises(asyncio.CancelledError):
        await registry.dispatch(call("raising", "{}"), ws.context())
