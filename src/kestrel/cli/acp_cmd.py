"""`kestrel acp`: Kestrel as an agent inside an editor, over the Agent Client Protocol on stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events_base import PermissionMode

Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="PROVIDER:MODEL for the editor's sessions (default: the settings' model).",
    ),
]
Mode = Annotated[
    PermissionMode | None,
    typer.Option(
        "--permission-mode",
        help="The mode new sessions start in (default: the settings' mode); the editor's mode "
        "picker changes it per session.",
    ),
]


def acp_command(model: Model = None, permission_mode: Mode = None) -> None:
    """Speak the Agent Client Protocol on stdin and stdout, for an editor (Zed, JetBrains IDEs,
    Neovim) to start; see docs/ide.md. Nothing but the protocol is written to stdout."""
    from kestrel.app import build_provider
    from kestrel.service.sessions import settings_for

    try:  # Refuse a bad model or settings before the editor is told anything.
        settings = settings_for(Path.cwd(), {"model": model, "permission_mode": permission_mode})
        build_provider(settings.model, base_url=settings.base_url, cwd=Path.cwd())
    except ConfigError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    from kestrel.acp.agent import AcpOptions
    from kestrel.acp.server import serve

    serve(AcpOptions(model=model, mode=permission_mode))
