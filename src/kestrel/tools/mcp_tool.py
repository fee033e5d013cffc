"""Another MCP server's tools, offered to the model as `mcp__SERVER__TOOL`.

They are tools like the built-in ones: the registry validates their calls, permission rules,
hooks and the classifier see them by their namespaced name, their results are scanned for text
aimed at the agent, and output past the limit is cut and saved whole like a command's. A tool the
server marks read-only is a `read` tool (allowed in plan mode); every other one is `execute`, so
the default mode asks before it runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, ClassVar

import mcp_types as types
from pydantic import BaseModel, ConfigDict, model_validator

from kestrel.protocol.events import ErrorOccurred, Event
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.mcp_client import McpServer, McpServerFailed
from kestrel.tools.shell import cut_middle, save_artifact

MAX_NAME = 64
"""The longest tool name the providers accept."""
MAX_DESCRIPTION = 2_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__server__tool`, with characters providers refuse replaced and a long name shortened
    (a short hash of the original keeps two long names apart)."""
    name = f"mcp__{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


class _McpArgs(BaseModel):
    """Arguments for a tool whose schema the server gives; the server checks them in full."""

    model_config = ConfigDict(extra="allow")
    server_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(cls.server_schema)

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        missing = [key for key in cls.server_schema.get("required", []) if key not in data]
        if missing:
            raise ValueError(f"missing required argument {missing[0]!r}")
        return data


class McpTool:
    """One tool of one MCP server; made per tool by `mcp_tool`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    kind: ClassVar[ToolKind] = "execute"
    Args: ClassVar[type[BaseModel]] = _McpArgs
    remote_name: ClassVar[str] = ""

    def __init__(self, server: McpServer) -> None:
        self.server = server

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Call the tool on its server and show the model what came back."""
        arguments = args.model_dump()
        try:
            result = await self.server.call(self.remote_name, arguments)
        except McpServerFailed as exc:
            return ToolOutcome(content=str(exc), is_error=True, events=self._notices())
        except Exception as exc:  # the server's own error for this call, e.g. bad arguments
            raise ToolFailed(f"{self.name}: {type(exc).__name__}: {exc}") from None
        text = render_result(result)
        outcome = ToolOutcome(content=text, is_error=bool(result.is_error))
        if len(text) > ctx.max_output_chars:
            saved = save_artifact(ctx.artifacts_dir, text)
            outcome = ToolOutcome(
                content=cut_middle(text, ctx.max_output_chars, saved),
                is_error=outcome.is_error,
                truncated=True,
                full_output_path=str(saved),
            )
        return ToolOutcome(
            content=outcome.content,
            is_error=outcome.is_error,
            truncated=outcome.truncated,
            full_output_path=outcome.full_output_path,
            events=self._notices(),
        )

    def _notices(self) -> tuple[Event, ...]:
        notices, self.server.notices[:] = list(self.server.notices), []
        return tuple(
            ErrorOccurred(error_kind="mcp_server", message=text, recoverable=True)
            for text in notices
        )


def mcp_tool(server: McpServer, tool: types.Tool) -> McpTool:
    """The Kestrel tool for `tool` of `server`."""
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    read_only = bool(tool.annotations and tool.annotations.read_only_hint)
    description = (tool.description or tool.title or tool.name).strip()
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 3] + "..."
    label = f"(MCP server {server.config.name}) "
    name = tool_name(server.config.name, tool.name)
    args = type(f"{name}_args", (_McpArgs,), {"server_schema": schema})
    made: type[McpTool] = type(
        name,
        (McpTool,),
        {
            "name": name,
            "description": label + description,
            "kind": "read" if read_only else "execute",
            "Args": args,
            "remote_name": tool.name,
        },
    )
    return made(server)


def render_result(result: types.CallToolResult) -> str:
    """What the model sees of a tool result: its text, and a line for each thing not text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            size = len(block.data) * 3 // 4
            parts.append(f"[{block.type}: {block.mime_type}, about {size:,} bytes, not shown]")
        elif isinstance(block, types.EmbeddedResource):
            parts.append(_resource_text(block.resource))
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link: {block.uri} ({block.name})]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"


def _resource_text(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, not shown]"
