"""`kestrel approve` and `kestrel cancel`: answer a running session's permission question, or
stop it, from another terminal (the session may run headless with --wait-for-approvals)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.cli.frontends import shorten
from kestrel.protocol.errors import ConfigError, KestrelError
from kestrel.settings_load import load_settings

if TYPE_CHECKING:
    from kestrel.store.base import EventStore

SessionArg = Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")]


def approve_command(
    session_id: SessionArg,
    call_id: Annotated[
        str | None,
        typer.Argument(help="The call asked about (or a prefix), when several questions wait."),
    ] = None,
    deny: Annotated[bool, typer.Option("--deny", help="Refuse the call instead.")] = False,
    always: Annotated[
        bool,
        typer.Option("--always", help="Allow this tool for the rest of the session, unasked."),
    ] = False,
    message: Annotated[
        str, typer.Option("--message", "-m", help="Words for the model (why, for a denial).")
    ] = "",
    list_only: Annotated[
        bool, typer.Option("--list", help="Only list the open questions, as JSON lines.")
    ] = False,
) -> None:
    """Answer the permission question a session waits on; with --list, show what waits."""
    from kestrel.service.approvals import answer_approval, pending_approvals

    console = Console(highlight=False, soft_wrap=True)
    if deny and always:
        report_error(ConfigError("--always allows a tool; it cannot go with --deny"))
        raise typer.Exit(EXIT_USAGE)
    try:
        store = _open_store()
        try:
            sid = store.resolve(session_id)
            if list_only:
                for pending in pending_approvals(store, sid):
                    question = pending.question
                    print(
                        json.dumps(
                            {
                                "session_id": pending.session_id,
                                "call_id": question.call_id,
                                "tool": question.name,
                                "arguments": question.arguments,
                                "reason": question.reason,
                            }
                        )
                    )
                return
            answered = answer_approval(
                store,
                sid,
                allow=not deny,
                call_id=call_id,
                scope="session" if always else "once",
                message=message,
                by="kestrel approve",
            )
        finally:
            store.close()
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    verdict = "Denied" if deny else "Allowed"
    question = answered.question
    console.print(
        f"{verdict} {escape(question.name)} {escape(shorten(question.arguments))} "
        f"in session {answered.session_id}" + (" (and for the rest of it)" if always else "")
    )


def cancel_command(
    session_id: SessionArg,
    message: Annotated[str, typer.Option("--message", "-m", help="Why, for the log.")] = "",
) -> None:
    """Stop a session that runs in another process, as Ctrl-C there would; resume it later."""
    from kestrel.service.decisions import request_cancel

    try:
        store = _open_store()
        try:
            sid = store.resolve(session_id)
            request_cancel(store, sid, by="kestrel cancel", reason=message)
        finally:
            store.close()
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    Console(highlight=False, soft_wrap=True).print(
        f"Asked session {sid} to stop; the process running it settles it as cancelled."
    )


def _open_store() -> EventStore:
    from kestrel import app

    settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
    return app.open_store(settings)
