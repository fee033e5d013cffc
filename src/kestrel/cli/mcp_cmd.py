"""`kestrel mcp serve`: offer Kestrel's engines to another agent over MCP on stdin and stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events_base import PermissionMode

mcp_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True)


@mcp_app.callback()
def mcp() -> None:
    """Model Context Protocol: `kestrel mcp serve` lets an MCP client use Kestrel's tools."""


Cwd = Annotated[
    Path | None,
    typer.Option(
        "--cwd",
        help="The repository to serve (default: the current directory).",
        file_okay=False,
        exists=True,
    ),
]
ReadOnly = Annotated[
    bool,
    typer.Option(
        "--read-only",
        help="Offer no apply_edit, and run tasks in plan mode only (nothing is changed).",
    ),
]
Mode = Annotated[
    PermissionMode | None,
    typer.Option(
        "--permission-mode",
        help="The widest mode a run_task may use, and its default (default: the settings' "
        "mode; bypass only when named here).",
    ),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="PROVIDER:MODEL for run_task sessions (default: the settings' model)."
    ),
]


@mcp_app.command("serve")
def serve_command(
    cwd: Cwd = None,
    read_only: ReadOnly = False,
    permission_mode: Mode = None,
    model: Model = None,
) -> None:
    """Serve search, map, apply_edit and run_task over MCP on stdin and stdout (for an MCP
    client such as Claude Code to start; see docs/mcp.md)."""
    from kestrel.mcp_server.options import ServeOptions, permission_cap
    from kestrel.service.sessions import settings_for

    root = (cwd or Path.cwd()).resolve()
    try:
        settings = settings_for(root, {"model": model})
        cap, note = permission_cap(permission_mode, settings.permission_mode, read_only=read_only)
    except ConfigError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    if note is not None:
        typer.echo(f"kestrel: {note}", err=True)
    options = ServeOptions(
        root=root,
        read_only=read_only,
        mode_cap=cap,
        model=model,
        max_output_chars=settings.tools.max_output_chars,
    )
    from kestrel.mcp_server.server import serve

    serve(options)
