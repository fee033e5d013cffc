"""`kestrel mcp list|add|remove|test`: the MCP servers whose tools sessions may call."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import typer

from kestrel.protocol.errors import ConfigError
from kestrel.settings_load import settings_files, trust_store_path, user_settings_path
from kestrel.settings_mcp import (
    PROJECT_FILE,
    USER_FILE,
    add_server,
    json_layer_data,
    project_mcp_file,
    remove_server,
)
from kestrel.settings_trust import digest, trust_key
from kestrel.settings_trust_store import TrustStore

Scope = Literal["user", "project"]
EXIT_ERROR = 1
EXIT_SETTINGS = 2


def user_file() -> Path:
    """The user's `mcp.json`, beside their settings file."""
    return user_settings_path(env=os.environ, home=Path.home()).parent / USER_FILE


def scope_file(scope: Scope, cwd: Path) -> Path:
    """Where `add` writes for `scope`: the user's file, or the repository's `.mcp.json`."""
    if scope == "user":
        return user_file()
    return project_mcp_file(cwd) or _repository_root(cwd) / PROJECT_FILE


def list_servers(cwd: Path) -> int:
    """Print every configured server with where it comes from; later sources win by name."""
    user = user_settings_path(env=os.environ, home=Path.home())
    store = TrustStore(trust_store_path(user))
    rows: list[tuple[str, str, str, str]] = []
    for path in settings_files(cwd, env=os.environ, home=Path.home()):
        if not path.is_file():
            continue
        servers, raw = _servers_in(path)
        own = path.parent == user.parent
        note = "" if own or not servers else _trust_note(path, raw, store)
        for name, entry in servers.items():
            rows.append((name, _transport(entry), _what(entry), f"{path}{note}"))
    if not rows:
        typer.echo("no MCP servers configured; add one with `kestrel mcp add NAME -- COMMAND`")
        return 0
    names = [row[0] for row in rows]
    width = max(len(name) for name in names)
    for index, (name, transport, what, origin) in enumerate(rows):
        later = name in names[index + 1 :]
        suffix = "  (replaced by a later entry)" if later else ""
        typer.echo(f"{name:<{width}}  {transport:<5}  {what}\n{'':<{width}}  from {origin}{suffix}")
    return 0


def add(name: str, scope: Scope, cwd: Path, entry: dict[str, Any]) -> int:
    """Write one server into the chosen file."""
    path = scope_file(scope, cwd)
    add_server(path, name, entry)
    typer.echo(f"added MCP server {name!r} to {path}")
    if scope == "project":
        typer.echo("other people get it with the repository; each of them runs `kestrel trust`")
    typer.echo(f"check it with `kestrel mcp test {name}`")
    return 0


def remove(name: str, scope: Scope | None, cwd: Path) -> int:
    """Remove a server from the user's file or the repository's (both looked at when no scope)."""
    scopes: list[Scope] = [scope] if scope else ["user", "project"]
    for each in scopes:
        path = scope_file(each, cwd)
        if path.is_file() and remove_server(path, name):
            typer.echo(f"removed MCP server {name!r} from {path}")
            return 0
    for path in settings_files(cwd, env=os.environ, home=Path.home()):
        if path.suffix == ".toml" and path.is_file() and name in _servers_in(path)[0]:
            typer.echo(
                f"kestrel: {name!r} is set in {path} ([mcp_servers.{name}]); remove it there",
                err=True,
            )
            return EXIT_ERROR
    typer.echo(f"kestrel: no MCP server named {name!r} (see `kestrel mcp list`)", err=True)
    return EXIT_ERROR


def entry_from(
    target: list[str],
    *,
    transport: str,
    env: list[str],
    headers: list[str],
    sandbox: bool,
    network: str,
    timeout: float | None,
) -> dict[str, Any]:
    """The `.mcp.json` entry for `kestrel mcp add`'s arguments; ConfigError for bad ones."""
    if not target:
        raise ConfigError("give the server's command after `--`, or its URL with --transport http")
    entry: dict[str, Any] = {}
    if transport == "stdio":
        entry |= {"command": target[0], "args": target[1:]}
        if env:
            entry["env"] = dict(_pair(item, "=", "--env") for item in env)
    else:
        if len(target) != 1:
            raise ConfigError(f"a {transport} server takes one URL, not a command")
        entry |= {"type": transport, "url": target[0]}
        if headers:
            entry["headers"] = dict(_pair(item, ":", "--header") for item in headers)
    if not sandbox:
        entry["sandbox"] = False
    if network != "none":
        entry["network"] = network
    if timeout is not None:
        entry["timeout"] = timeout
    return entry


def _pair(item: str, separator: str, flag: str) -> tuple[str, str]:
    key, found, value = item.partition(separator)
    if not found or not key.strip():
        raise ConfigError(f"{flag} {item!r}: expected NAME{separator}VALUE")
    return key.strip(), value.strip() if separator == ":" else value


def _servers_in(path: Path) -> tuple[dict[str, Any], bytes]:
    raw = path.read_bytes()
    if path.suffix == ".json":
        servers = json_layer_data(path, raw).get("mcp_servers", {})
    else:
        try:
            servers = tomllib.loads(raw.decode("utf-8")).get("mcp_servers", {})
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            servers = {}
    return (servers if isinstance(servers, dict) else {}), raw


def _trust_note(path: Path, raw: bytes, store: TrustStore) -> str:
    record = store.read().get(trust_key(path.absolute()))
    if record is not None and record.sha256 == digest(raw):
        return " (trusted)"
    return " (not trusted: review it, then run `kestrel trust`)"


def _transport(entry: object) -> str:
    if not isinstance(entry, dict):
        return "?"
    kind = entry.get("type") or ("stdio" if "command" in entry else "http")
    return str(kind)


def _what(entry: object) -> str:
    if not isinstance(entry, dict):
        return repr(entry)
    if "command" in entry:
        args = entry.get("args") if isinstance(entry.get("args"), list) else []
        line = " ".join(str(part) for part in [entry["command"], *(args or [])])
        sandboxed = entry.get("sandbox", True) is not False
        return line + ("" if sandboxed else "  (outside the sandbox)")
    headers = entry.get("headers")
    names = ", ".join(headers) if isinstance(headers, dict) else ""
    return str(entry.get("url", "")) + (f"  (headers: {names})" if names else "")


def _repository_root(cwd: Path) -> Path:
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return cwd
