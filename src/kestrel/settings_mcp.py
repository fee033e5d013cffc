"""MCP servers in settings: `[mcp_servers.NAME]` tables, and the `.mcp.json` files read as layers.

Servers come from, lowest first: the user's settings file, the user's `mcp.json` beside it, the
repository's `.mcp.json` (nearest from the working directory up to the repository root), then the
repository's own settings files. Both JSON files are in Claude Code's format (see
`kestrel.mcp_config`). A repository's servers start only once the user trusts the file that
names them (`kestrel trust`), like its hooks: they run commands on this machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kestrel.mcp_config import McpConfigError, server_config
from kestrel.protocol.errors import ConfigError

USER_FILE = "mcp.json"
"""The user's servers, in the folder of their settings file."""
PROJECT_FILE = ".mcp.json"
"""A repository's servers, at its root (or nearer the working directory)."""


class _AnyVariable(Mapping[str, str]):
    """An environment in which every variable is set: settings are checked before a run's
    environment is known, so only the shape of `${VAR}` uses is checked there."""

    def __getitem__(self, key: str) -> str:
        return "x"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def check_servers(value: object) -> dict[str, dict[str, Any]]:
    """`mcp_servers` as settings hold it (raw tables by name), each entry checked for shape."""
    if not isinstance(value, Mapping):
        raise ValueError("expected a table of servers by name")
    for name, entry in value.items():
        try:
            server_config(name, entry, "", _AnyVariable())
        except McpConfigError as exc:
            raise ValueError(str(exc).removeprefix(": ")) from None
    return {name: dict(entry) for name, entry in value.items()}


def json_layer_data(path: Path, raw: bytes) -> dict[str, Any]:
    """A `.mcp.json` file's bytes as settings data (`{"mcp_servers": {...}}`); ConfigError when
    it is not such a file."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc.msg} at line {exc.lineno}") from None
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{path}: expected {{"mcpServers": {{"NAME": {{...}}}}}}')
    return {"mcp_servers": servers} if servers else {}


def project_mcp_file(cwd: Path) -> Path | None:
    """The nearest `.mcp.json` from `cwd` up to the repository root."""
    for directory in (cwd, *cwd.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():
            return None
    return None


def server_findings(servers: object) -> Iterator[tuple[str, str]]:
    """`(key, what it runs or reaches)` for each server a repository's file names."""
    if not isinstance(servers, Mapping):
        if servers not in (None, {}):
            yield "mcp_servers", json.dumps(servers, ensure_ascii=True, default=str)
        return
    for name, entry in servers.items():
        key = "mcp_servers." + json.dumps(name, ensure_ascii=True).strip('"')
        if isinstance(entry, Mapping) and isinstance(entry.get("command"), str):
            args = entry.get("args")
            listed = args if isinstance(args, list) else []
            shown = [entry["command"], *(str(a) for a in listed)]
        elif isinstance(entry, Mapping) and isinstance(entry.get("url"), str):
            shown = [entry["url"]]
        else:
            shown = [json.dumps(entry, ensure_ascii=True, default=str)]
        yield key, json.dumps(" ".join(shown), ensure_ascii=True)


def read_servers_file(path: Path) -> dict[str, Any]:
    """The whole JSON document of an `mcp.json` (empty when missing); ConfigError if unusable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    json_layer_data(path, raw)  # the same checks as when settings are loaded
    document = json.loads(raw.decode("utf-8"))
    return document if isinstance(document, dict) else {}


def write_servers_file(path: Path, document: Mapping[str, Any]) -> None:
    """Replace `path` with `document` in one step, keeping what else the file held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    temporary.replace(path)


def add_server(path: Path, name: str, entry: Mapping[str, Any]) -> None:
    """Add server `name` to the `mcp.json` at `path`; ConfigError if it is named already or
    the entry is not valid."""
    try:
        server_config(name, entry, str(path), _AnyVariable())
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from None
    document = read_servers_file(path)
    servers = document.setdefault("mcpServers", {})
    if name in servers:
        raise ConfigError(
            f"{path}: an MCP server named {name!r} exists; `kestrel mcp remove {name}` first"
        )
    servers[name] = dict(entry)
    write_servers_file(path, document)


def remove_server(path: Path, name: str) -> bool:
    """Remove server `name` from the `mcp.json` at `path`; False if it is not there."""
    document = read_servers_file(path)
    servers = document.get("mcpServers", {})
    if name not in servers:
        return False
    del servers[name]
    write_servers_file(path, document)
    return True
