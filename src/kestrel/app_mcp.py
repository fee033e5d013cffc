"""Other MCP servers' tools for a session: which servers the settings name, and the session's
servers and tools when there are any.

Only this module is imported when a session starts; the MCP SDK and the servers' set-up
(`app_mcp_servers`) are imported when the settings name a server, so a session without MCP
servers does not pay for loading the SDK (about a second of start-up).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kestrel.mcp_config import McpConfigError, McpServerConfig, server_config
from kestrel.sandbox.base import Executor
from kestrel.settings import Settings
from kestrel.tools.base import Tool

if TYPE_CHECKING:
    from kestrel.tools.mcp_client import McpServer


@dataclass(frozen=True, slots=True)
class McpSetup:
    """The MCP servers of a session, their tools, and what went wrong on the way."""

    servers: tuple[McpServer, ...]
    tools: tuple[Tool, ...]
    problems: tuple[str, ...]


def configured_servers(
    settings: Settings, env: Mapping[str, str]
) -> tuple[list[McpServerConfig], list[str]]:
    """Every server the settings name, with `${VAR}`s filled from `env`, and the problems of
    those that cannot be used (one line each)."""
    configs: list[McpServerConfig] = []
    problems: list[str] = []
    for name, entry in settings.mcp_servers.items():
        try:
            configs.append(server_config(name, entry, "settings", env))
        except McpConfigError as exc:
            problems.append(str(exc).removeprefix("settings: "))
    return configs, problems


def mcp_setup(settings: Settings, cwd: Path, executor: Executor, session_id: str) -> McpSetup:
    """The session's MCP servers (nothing started) and their tools."""
    configs, problems = configured_servers(settings, os.environ)
    problems = [*settings.skipped, *problems]
    configs = [c for c in configs if c.enabled]
    if not configs:
        return McpSetup((), (), tuple(problems))
    from kestrel.app_mcp_servers import open_servers

    servers, tools, more = open_servers(settings, cwd, executor, session_id, configs)
    return McpSetup(servers, tools, (*problems, *more))
