"""`kestrel mcp serve`: offer Kestrel's engines to another agent over MCP on stdin and stdout;
`kestrel mcp list|add|remove|test`: the other MCP servers whose tools sessions may call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events_base import PermissionMode

mcp_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True)


@mcp_app.callback()
def mcp() -> None:
    """Model Context Protocol: `kestrel mcp serve` lets an MCP client use Kestrel's tools;
    `kestrel mcp list|add|remove|test` manage the servers whose tools Kestrel uses."""


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


ScopeOption = Annotated[
    Literal["user", "project"],
    typer.Option(
        "--scope",
        "-s",
        help="user: your own mcp.json beside settings.toml; project: the repository's .mcp.json "
        "(shared, and each person must `kestrel trust` it).",
    ),
]


@mcp_app.command("list")
def list_command(cwd: Cwd = None) -> None:
    """List the MCP servers sessions here may use, with the file each comes from."""
    from kestrel.cli.mcp_manage import list_servers

    raise typer.Exit(_guarded(lambda: list_servers((cwd or Path.cwd()).resolve())))


@mcp_app.command(
    "add",
    epilog="Examples: kestrel mcp add time -- uvx mcp-server-time · kestrel mcp add docs "
    "--transport http https://docs.example/mcp --header 'Authorization: Bearer ${DOCS_TOKEN}'",
)
def add_command(
    name: Annotated[str, typer.Argument(help="The server's name: tools become mcp__NAME__TOOL.")],
    target: Annotated[
        list[str] | None,
        typer.Argument(help="The command and its arguments (after --), or the server's URL."),
    ] = None,
    scope: ScopeOption = "user",
    transport: Annotated[
        Literal["stdio", "http", "sse"], typer.Option("--transport", "-t", help="How to reach it.")
    ] = "stdio",
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE for a stdio server.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="'Name: value' for HTTP.")
    ] = None,
    no_sandbox: Annotated[
        bool, typer.Option("--no-sandbox", help="Run a stdio server outside the sandbox.")
    ] = False,
    network: Annotated[
        Literal["none", "host"],
        typer.Option("--network", help="host: a sandboxed server may reach the network."),
    ] = "none",
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds a call may take (default 60).")
    ] = None,
    cwd: Cwd = None,
) -> None:
    """Add an MCP server; `${VAR}` in values is read from the environment when it starts."""
    from kestrel.cli.mcp_manage import add, entry_from

    def run() -> int:
        entry = entry_from(
            list(target or []),
            transport=transport,
            env=list(env or []),
            headers=list(header or []),
            sandbox=not no_sandbox,
            network=network,
            timeout=timeout,
        )
        return add(name, scope, (cwd or Path.cwd()).resolve(), entry)

    raise typer.Exit(_guarded(run))


@mcp_app.command("remove")
def remove_command(
    name: Annotated[str, typer.Argument(help="The server to remove.")],
    scope: Annotated[
        Literal["user", "project"] | None,
        typer.Option(
            "--scope", "-s", help="Only look in this file (default: yours, then the repository's)."
        ),
    ] = None,
    cwd: Cwd = None,
) -> None:
    """Remove an MCP server added with `kestrel mcp add`."""
    from kestrel.cli.mcp_manage import remove

    raise typer.Exit(_guarded(lambda: remove(name, scope, (cwd or Path.cwd()).resolve())))


@mcp_app.command("test")
def test_command(
    name: Annotated[str, typer.Argument(help="The server to start and list.")],
    cwd: Cwd = None,
) -> None:
    """Start a server as a session would (in the sandbox unless set otherwise), list its tools,
    resources and prompts, and stop it."""
    from kestrel.cli.mcp_report import test_server

    raise typer.Exit(_guarded(lambda: test_server(name, (cwd or Path.cwd()).resolve())))


def _guarded(work: Callable[[], int]) -> int:
    try:
        return work()
    except ConfigError as exc:
        report_error(exc)
        return EXIT_USAGE
