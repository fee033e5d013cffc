"""The resources of MCP servers (files, records, documents they expose by URI), for the model to
list and read: two tools, offered when at least one configured server has resources."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import ClassVar

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.mcp_client import START_TIMEOUT_S, McpServer, McpServerFailed
from kestrel.tools.shell import cut_middle, save_artifact

MAX_LISTED = 200


class ListArgs(BaseModel):
    """Arguments of `list_mcp_resources`."""

    model_config = ConfigDict(extra="forbid")
    server: str | None = Field(default=None, description="Only this server's resources.")


class ReadArgs(BaseModel):
    """Arguments of `read_mcp_resource`."""

    model_config = ConfigDict(extra="forbid")
    server: str = Field(description="The server that lists the resource.")
    uri: str = Field(description="The resource's URI, as list_mcp_resources shows it.")


class _ResourceTool:
    kind: ClassVar[ToolKind] = "read"

    def __init__(self, servers: Mapping[str, McpServer]) -> None:
        self.servers = dict(servers)

    def _server(self, name: str) -> McpServer:
        server = self.servers.get(name)
        if server is None:
            known = ", ".join(self.servers) or "none"
            raise ToolFailed(f"no MCP server {name!r} with resources; servers: {known}")
        return server


class ListMcpResources(_ResourceTool):
    """List what MCP servers expose as resources."""

    name: ClassVar[str] = "list_mcp_resources"
    Args: ClassVar[type[BaseModel]] = ListArgs
    description: ClassVar[str] = (
        "List the resources (documents, records, files) that the configured MCP servers expose, "
        "with each one's URI, name and type; read one with read_mcp_resource."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """One line per resource, grouped by server."""
        a = ListArgs.model_validate(args)
        names = [a.server] if a.server else list(self.servers)
        lines: list[str] = []
        for name in names:
            server = self._server(name)
            try:
                session = await server.session()
                listed = await asyncio.wait_for(session.list_resources(), START_TIMEOUT_S)
            except (McpServerFailed, OSError, TimeoutError) as exc:
                lines.append(f"{name}: unavailable ({exc})")
                continue
            lines.append(f"{name}: {len(listed.resources)} resources")
            for resource in listed.resources[:MAX_LISTED]:
                kind = f" ({resource.mime_type})" if resource.mime_type else ""
                lines.append(f"  {resource.uri}  {resource.name}{kind}")
            if len(listed.resources) > MAX_LISTED:
                lines.append(f"  ... and {len(listed.resources) - MAX_LISTED} more")
        return ToolOutcome(content="\n".join(lines) or "no resources")


class ReadMcpResource(_ResourceTool):
    """Read one resource of an MCP server."""

    name: ClassVar[str] = "read_mcp_resource"
    Args: ClassVar[type[BaseModel]] = ReadArgs
    description: ClassVar[str] = (
        "Read one resource of an MCP server by its URI (see list_mcp_resources). Text is shown; "
        "binary content is described."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """The resource's text, cut like any long result."""
        a = ReadArgs.model_validate(args)
        server = self._server(a.server)
        try:
            session = await server.session()
            read = await asyncio.wait_for(session.read_resource(a.uri), START_TIMEOUT_S)
        except McpServerFailed as exc:
            raise ToolFailed(str(exc)) from None
        except Exception as exc:
            raise ToolFailed(f"{a.server} could not read {a.uri}: {exc}") from None
        parts = []
        for content in read.contents:
            if isinstance(content, types.TextResourceContents):
                parts.append(content.text)
            else:
                parts.append(f"[{content.uri}: {content.mime_type or 'binary'}, not shown]")
        text = "\n".join(parts) or "(empty)"
        if len(text) <= ctx.max_output_chars:
            return ToolOutcome(content=text)
        saved = save_artifact(ctx.artifacts_dir, text)
        shown = cut_middle(text, ctx.max_output_chars, saved)
        return ToolOutcome(content=shown, truncated=True, full_output_path=str(saved))
