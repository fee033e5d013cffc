"""The MCP server: Kestrel's tools listed and called over stdio with the official SDK.

Calls go through Kestrel's own `ToolRegistry`, so a bad call is answered as the model's are: an
unknown tool, a missing, unknown or mistyped argument, or a tool's refusal comes back as an error
result with a sentence saying what to fix. Standard output is the protocol's: the SDK points the
process's own output at standard error while it serves, and logs go there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from kestrel.app_store import data_dir, version
from kestrel.context.embed import default_embedder
from kestrel.context.engine import ContextEngine
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.mcp_server.code_tools import MapTool, SearchTool
from kestrel.mcp_server.edit_tool import ApplyEditTool
from kestrel.mcp_server.options import ServeOptions
from kestrel.mcp_server.run_task import RunTaskTool
from kestrel.protocol.messages import ToolCall
from kestrel.sandbox.local import LocalExecutor
from kestrel.service.sessions import settings_for
from kestrel.tools.base import PlannedWrite, ToolContext
from kestrel.tools.base import Tool as KestrelTool
from kestrel.tools.code import CodeIndex
from kestrel.tools.registry import ToolRegistry

logger = logging.getLogger("kestrel.mcp")

INSTRUCTIONS = (
    "Kestrel, an autonomous coding agent, working on one repository. `search` and `map` find "
    "code with its context engine (fast, no model call); `apply_edit` changes text in a file "
    "with its edit engine; `run_task` hands a whole task to a Kestrel session and returns its "
    "summary and diff."
)


class KestrelServer:
    """One repository's tools, the code index they share, and the MCP handlers that call them."""

    def __init__(self, options: ServeOptions) -> None:
        """The tools `options` allow (no apply_edit when read-only), and the handlers."""
        self.options = options
        self.index = CodeIndex(_open_index)
        tools: list[KestrelTool] = [SearchTool(self.index), MapTool(self.index)]
        if not options.read_only:
            tools.append(ApplyEditTool())
        tools.append(RunTaskTool(options))
        self.registry = ToolRegistry(tools)
        self.executor = LocalExecutor()
        self._calls = itertools.count(1)
        self.artifacts = data_dir(settings_for(options.root, {})) / "artifacts" / "mcp"
        self.low = Server(
            "kestrel",
            version=version(),
            instructions=INSTRUCTIONS,
            lifespan=self._lifespan,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """Every tool offered, with its description and the JSON Schema of its arguments."""
        tools = []
        for spec in self.registry.specs():
            description = spec.description
            if spec.name == "run_task":
                description += (
                    f" This server allows permission modes up to {self.options.mode_cap}."
                )
            kind = self.registry.kind(spec.name)
            hints = ToolAnnotations(
                read_only_hint=kind == "read",
                destructive_hint=False if kind == "read" else None,
                open_world_hint=kind == "execute",
            )
            tools.append(
                Tool(
                    name=spec.name,
                    description=description,
                    input_schema=dict(spec.input_schema),
                    annotations=hints,
                )
            )
        return ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        """Run one call; every mistake and failure comes back as an error result, never raised."""
        if params.name == "apply_edit" and self.options.read_only:
            return _text_result(
                "apply_edit is not offered: this server was started with --read-only", error=True
            )
        number = next(self._calls)
        arguments = json.dumps(params.arguments or {})
        call = ToolCall(id=f"mcp-{number}", name=params.name, arguments=arguments)
        try:
            outcome = await self.registry.dispatch(call, self._context())
        except Exception as exc:  # The registry answers a tool's own failures; this is a bug.
            logger.exception("tool %s failed", params.name)
            return _text_result(f"{params.name} failed unexpectedly: {exc}", error=True)
        if outcome.is_error:
            first = outcome.content.partition("\n")[0]
            logger.info("tool %s refused: %s", params.name, first)
        return _text_result(outcome.content, error=outcome.is_error)

    def _context(self) -> ToolContext:
        """A fresh context per call: nothing was read through this server, so no edit is
        refused as based on a stale read."""
        return ToolContext(
            root=self.options.root,
            executor=self.executor,
            artifacts_dir=self.artifacts,
            on_output=lambda stream, text: None,
            before_write=_nothing_to_announce,
            max_output_chars=self.options.max_output_chars,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        """Start indexing at once, so the first search finds more; close the index at the end."""
        warm = asyncio.create_task(self._warm_up())
        try:
            yield {}
        finally:
            warm.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warm
            await asyncio.to_thread(self.index.close)

    async def _warm_up(self) -> None:
        """Open the index and start reading the repository before the first query."""
        try:
            await self.index.run(self.options.root, lambda engine: len(engine.paths))
        except Exception as exc:  # The first search reports it to the client.
            logger.warning("kestrel: indexing %s failed: %s", self.options.root, exc)

    async def serve_stdio(self) -> None:
        """Serve one client on stdin and stdout until it closes the connection."""
        async with stdio_server() as (read_stream, write_stream):
            await self.low.run(read_stream, write_stream, self.low.create_initialization_options())


def serve(options: ServeOptions) -> None:
    """Run the server on stdio until the client hangs up."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(levelname)s %(message)s"
    )
    # A tool that raised something unexpected is answered with one line; its traceback is
    # logged here, for whoever runs the server.
    logging.getLogger("kestrel.tools.registry").setLevel(logging.DEBUG)
    server = KestrelServer(options)
    names = ", ".join(server.registry.names())
    print(
        f"kestrel mcp serve: {options.root} (tools: {names}; run_task up to "
        f"{options.mode_cap}); speaking MCP on stdin and stdout",
        file=sys.stderr,
    )
    anyio.run(server.serve_stdio)


def _open_index(root: Path) -> ContextEngine:
    """The context engine for the repository, its index in the user's cache directory."""
    return ContextEngine.open(
        root,
        embedder=default_embedder(),
        ranker=default_ranker(),
        definition_ranker=default_definition_ranker(),
    )


async def _nothing_to_announce(plan: PlannedWrite) -> None:
    """Edits through this server land in the checkout directly: no session logs them first."""


def _text_result(text: str, *, error: bool) -> CallToolResult:
    """A result of one text block; `error` marks a call that did not do what it was asked."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)
