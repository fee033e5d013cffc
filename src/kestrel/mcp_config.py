"""MCP servers as configured: Claude Code's `.mcp.json` format, read into one typed entry each.

    {"mcpServers": {
        "tracker": {"command": "npx", "args": ["-y", "tracker-mcp"], "env": {"TOKEN": "${TOKEN}"}},
        "docs": {"type": "http", "url": "https://docs.example/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}

`type` is `stdio` (the default when `command` is given), `http` (streamable HTTP) or `sse`.
`${VAR}` and `${VAR:-default}` are replaced from the environment in `command`, `args`, `env`,
`url` and `headers`. Kestrel reads four keys of its own: `sandbox` (false runs a stdio server
outside the sandbox), `network` (`"host"` lets a sandboxed server reach the network),
`timeout` (seconds a call may take, 60 by default) and `enabled`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Transport = Literal["stdio", "http", "sse"]
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")
"""A server's name: it becomes part of tool names (`mcp__NAME__tool`), so no `__` and no dots."""
DEFAULT_TIMEOUT_S = 60.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_KEYS = {"type", "command", "args", "env", "cwd", "url", "headers"}
_KESTREL_KEYS = {"sandbox", "network", "timeout", "enabled"}


class McpConfigError(ValueError):
    """A server entry that cannot be used; the message names the server and what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    """One configured MCP server, with every `${VAR}` already replaced."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    sandbox: bool = True
    network: Literal["none", "host"] = "none"
    timeout_s: float = DEFAULT_TIMEOUT_S
    enabled: bool = True
    origin: str = ""
    """The file it came from, for messages."""

    def describe(self) -> str:
        """One line for people: the command line or the URL, never header or env values."""
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return f"{self.transport} {self.url}"

    def fingerprint(self) -> str:
        """What identifies this server's set-up, for the cache of its tool list."""
        shape = [self.transport, self.command, list(self.args), sorted(self.env), self.url]
        return json.dumps(shape, sort_keys=True)


def parse_mcp_json(raw: bytes, origin: str, env: Mapping[str, str]) -> list[McpServerConfig]:
    """Every server in a `.mcp.json` file's bytes; McpConfigError for a file that is not one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise McpConfigError(f"{origin}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{origin}: invalid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise McpConfigError(f'{origin}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
    servers = data.get("mcpServers", {})
    return [server_config(name, entry, origin, env) for name, entry in servers.items()]


def server_config(name: str, entry: object, origin: str, env: Mapping[str, str]) -> McpServerConfig:
    """One server entry read and checked; McpConfigError says what to fix."""
    where = f"{origin}: MCP server {name!r}"
    if not isinstance(name, str) or not NAME.match(name) or "__" in name:
        raise McpConfigError(
            f"{where}: a name is letters, digits, '-' and '_' (no '__'), at most 48 characters"
        )
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where}: expected an object")
    unknown = sorted(set(entry) - _KEYS - _KESTREL_KEYS)
    if unknown:
        raise McpConfigError(f"{where}: unknown key {unknown[0]!r}")
    transport = entry.get("type") or ("stdio" if "command" in entry else "http")
    if transport == "streamable-http":
        transport = "http"
    if transport not in ("stdio", "http", "sse"):
        raise McpConfigError(f"{where}: type must be stdio, http or sse, not {transport!r}")
    expand = _Expander(where, env)
    common = _kestrel_keys(entry, where)
    if transport == "stdio":
        command = expand.text(_string(entry, "command", where, required=True))
        if not command.strip():
            raise McpConfigError(f"{where}: command is empty")
        cwd = entry.get("cwd")
        return McpServerConfig(
            name=name,
            transport="stdio",
            command=command,
            args=tuple(expand.text(a) for a in _strings(entry, "args", where)),
            env={k: expand.text(v) for k, v in _table(entry, "env", where).items()},
            cwd=expand.text(cwd) if isinstance(cwd, str) else None,
            origin=origin,
            **common,
        )
    url = expand.text(_string(entry, "url", where, required=True))
    if not url.startswith(("http://", "https://")):
        raise McpConfigError(f"{where}: url must start with http:// or https://")
    return McpServerConfig(
        name=name,
        transport="sse" if transport == "sse" else "http",
        url=url,
        headers={k: expand.text(v) for k, v in _table(entry, "headers", where).items()},
        origin=origin,
        **common,
    )


def _kestrel_keys(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    sandbox = entry.get("sandbox", True)
    enabled = entry.get("enabled", True)
    network = entry.get("network", "none")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if not isinstance(sandbox, bool) or not isinstance(enabled, bool):
        raise McpConfigError(f"{where}: sandbox and enabled are true or false")
    if network not in ("none", "host"):
        raise McpConfigError(f'{where}: network is "none" or "host"')
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise McpConfigError(f"{where}: timeout is a number of seconds above 0")
    return {"sandbox": sandbox, "enabled": enabled, "network": network, "timeout_s": timeout}


def _string(entry: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise McpConfigError(f"{where}: {key} must be a string")
    return value


def _strings(entry: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{where}: {key} must be a list of strings")
    return value


def _table(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f"{where}: {key} must map names to strings")
    return dict(value)


@dataclass(frozen=True, slots=True)
class _Expander:
    where: str
    env: Mapping[str, str]

    def text(self, value: str) -> str:
        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = self.env.get(name)
            if found is not None:
                return found
            if default is not None:
                return default
            raise McpConfigError(f"{self.where}: ${{{name}}} is not set in the environment")

        return _VAR.sub(one, value)
