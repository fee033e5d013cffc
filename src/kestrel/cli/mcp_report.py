"""`kestrel mcp test NAME`: start one configured server and show what it offers."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from kestrel.protocol.errors import ConfigError

EXIT_ERROR = 1


def test_server(name: str, cwd: Path) -> int:
    """Start server `name` as a session in `cwd` would, print its offer; 1 when it fails."""
    from kestrel.app_mcp import configured_servers
    from kestrel.app_mcp_servers import check_server
    from kestrel.service.sessions import settings_for

    settings = settings_for(cwd, {})
    configs, problems = configured_servers(settings, os.environ)
    config = next((c for c in configs if c.name == name), None)
    if config is None:
        why = next((p for p in [*settings.skipped, *problems] if name in p), None)
        raise ConfigError(why or f"no MCP server named {name!r} (see `kestrel mcp list`)")
    where = (
        "outside the sandbox"
        if not config.sandbox or settings.sandbox == "none"
        else ("in the sandbox")
    )
    place = f"{config.transport}, {where}" if config.transport == "stdio" else config.transport
    typer.echo(f"{name}: starting {config.describe()} ({place})", err=True)
    checked = check_server(settings, cwd, config)
    if checked.listing is None:
        typer.echo(f"kestrel: {checked.problem}", err=True)
        return EXIT_ERROR
    tools = checked.listing.tools
    typer.echo(f"{name}: answered in {checked.seconds:.2f} s")
    width = max([len(tool.name) for tool in tools] + [4])
    typer.echo(f"tools ({len(tools)}), offered as mcp__{name}__TOOL:")
    for tool in tools:
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        summary = (tool.description or "").strip().splitlines()
        typer.echo(
            f"  {tool.name:<{width}}  {'read-only' if read_only else 'asks    '}  "
            f"{summary[0][:90] if summary else ''}"
        )
    for label, items in (("resources", checked.resources), ("prompts", checked.prompts)):
        typer.echo(f"{label} ({len(items)}):" + ("" if items else " none"))
        for item in items:
            typer.echo(f"  {item}")
    return 0
