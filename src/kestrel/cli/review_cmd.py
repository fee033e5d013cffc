"""`kestrel diff`, `kestrel apply` and `kestrel discard`: review a session's change and decide."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kestrel import app
from kestrel.cli.drive import EXIT_ERROR, EXIT_USAGE, report_error
from kestrel.cli.render import handoff_lines
from kestrel.protocol.errors import ConfigError, KestrelError, SessionNotFound
from kestrel.service import review
from kestrel.workspace.review import summary_line
from kestrel.workspace.verify.security import finding_lines

SessionArg = Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")]


def diff_command(
    session_id: SessionArg,
    stat: Annotated[bool, typer.Option("--stat", help="Only the changed paths.")] = False,
) -> None:
    """Show the change a session left in its overlay (or since its last apply), as a diff."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        store = app.open_store(review.settings_at(Path.cwd()))
        try:
            sid, pending = review.pending_diff(store, session_id)
        finally:
            store.close()
    except (ConfigError, SessionNotFound, KestrelError) as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    if pending is None:
        console.print(f"session {sid} has no change waiting to be applied")
        return
    console.print(f"[bold]{escape(summary_line(pending.changes))}[/bold]")
    for change in pending.changes.changes:
        console.print(f"  {change.status} {escape(change.path)}")
    noted = [(r.path, r.reason) for r in pending.refusals]
    noted += [(f.path, f.reason) for f in pending.flags]
    for path, reason in noted:
        console.print(f"  [yellow]⚠ {escape(path)}: {escape(reason)}[/yellow]")
    for line in finding_lines(pending.security.blocking):
        console.print(f"  [red]⚠ {escape(line)} (blocks the apply)[/red]")
    for line in finding_lines(pending.security.reported):
        console.print(f"  [yellow]⚠ {escape(line)}[/yellow]")
    if stat:
        return
    if sys.stdout.isatty():
        for line in pending.diff.splitlines():
            console.print(Text(line, style=_style(line)))
    else:
        sys.stdout.write(pending.diff)


def _style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return "cyan" if line.startswith("@@") else ""


def apply_command(
    session_id: SessionArg,
    accept_security_findings: Annotated[
        bool,
        typer.Option(
            "--accept-security-findings",
            help="Apply even though the security gate found a secret or a high-severity "
            "problem in the change (read them first: `kestrel diff`); the findings are "
            "recorded in the session's log.",
        ),
    ] = False,
) -> None:
    """Apply a session's change to the checkout, all or nothing; conflicts are reported."""
    raise typer.Exit(_decide(session_id, apply=True, accept=accept_security_findings))


def discard_command(session_id: SessionArg) -> None:
    """Throw away the change a session left in its overlay; the checkout is not touched."""
    raise typer.Exit(_decide(session_id, apply=False))


def _decide(session_id: str, *, apply: bool, accept: bool = False) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        store = app.open_store(review.settings_at(Path.cwd()))
        try:
            decided = review.decide_change(
                store, session_id, apply=apply, accept_security_findings=accept
            )
        finally:
            store.close()
    except (ConfigError, SessionNotFound, KestrelError) as exc:
        report_error(exc)
        return EXIT_USAGE
    sid = decided.session_id
    if decided.outcome == "already applied":
        console.print(
            f"session {sid}: its change was already applied; no change waiting to be applied"
        )
        return 0
    if decided.outcome == "discarded":
        what = summary_line(decided.discarded) if decided.discarded else "no change"
        console.print(f"discarded ({what}); the checkout was not touched")
        return 0
    handoff = decided.handoff
    if handoff is None or handoff.ready is None:
        console.print(f"session {sid} has no change waiting to be applied")
        return 0
    for event in (handoff.ready, handoff.applied):
        for line in handoff_lines(event, sid) if event else ():
            console.print(escape(line))
    if handoff.applied and handoff.applied.accepted_findings:
        count = len(handoff.applied.accepted_findings)
        console.print(f"applied with {count} accepted security finding(s), recorded in the log")
    return 0 if handoff.applied and handoff.applied.outcome == "applied" else EXIT_ERROR
