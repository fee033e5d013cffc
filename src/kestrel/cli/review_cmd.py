"""`kestrel diff`, `kestrel apply` and `kestrel discard`: review a session's change and decide."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kestrel import app, app_workspace
from kestrel.cli.drive import EXIT_ERROR, EXIT_USAGE, report_error
from kestrel.cli.render import handoff_lines
from kestrel.protocol.errors import ConfigError, KestrelError, SessionNotFound
from kestrel.protocol.events import Event, SessionStarted
from kestrel.settings import Settings
from kestrel.settings_load import load_settings
from kestrel.store.base import EventStore
from kestrel.workspace.apply import check
from kestrel.workspace.handoff import pending_change
from kestrel.workspace.overlay import layer_for
from kestrel.workspace.review import summary_line

SessionArg = Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")]


def _session(store: EventStore, raw_id: str) -> tuple[str, Path, list[Event]]:
    session_id = store.resolve(raw_id)
    events = [record.event for record in store.read(session_id)]
    started = events[0] if events else None
    if not isinstance(started, SessionStarted):
        raise ConfigError(f"session {session_id}: its log does not begin with session_started")
    return session_id, Path(started.cwd), events


def _existing(session_id: str, cwd: Path) -> Path:
    """The session's directory, or a `ConfigError` saying it is gone (a demo's, say)."""
    if not cwd.is_dir():
        raise ConfigError(f"session {session_id} worked in {cwd}, which no longer exists")
    return cwd


def _settings(cwd: Path) -> Settings:
    return load_settings(cwd, env=os.environ, flags={}, home=Path.home())


def diff_command(
    session_id: SessionArg,
    stat: Annotated[bool, typer.Option("--stat", help="Only the changed paths.")] = False,
) -> None:
    """Show the change a session left in its overlay (or since its last apply), as a diff."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        settings = _settings(Path.cwd())
        store = app.open_store(settings)
        sid, cwd, events = _session(store, session_id)
        app_workspace.refuse_cut_short(store, sid, app_workspace.tool_kinds())
        settings = _settings(cwd)
        layer = layer_for(app.data_dir(settings), sid)
        root = layer.tree if layer.tree.is_dir() else _existing(sid, cwd)
        checkpoints = app.checkpointer_for(settings, root, sid).store
        pending = pending_change(checkpoints, events)
    except (ConfigError, SessionNotFound, KestrelError) as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    if pending is None:
        console.print(f"session {sid} has no change waiting to be applied")
        return
    refusals, flags = check(pending.changes)
    console.print(f"[bold]{escape(summary_line(pending.changes))}[/bold]")
    for change in pending.changes.changes:
        console.print(f"  {change.status} {escape(change.path)}")
    noted = [(r.path, r.reason) for r in refusals] + [(f.path, f.reason) for f in flags]
    for path, reason in noted:
        console.print(f"  [yellow]⚠ {escape(path)}: {escape(reason)}[/yellow]")
    if stat:
        return
    base = pending.base or checkpoints.list()[0].id
    text = checkpoints.diff(base, pending.head)
    if sys.stdout.isatty():
        for line in text.splitlines():
            console.print(Text(line, style=_style(line)))
    else:
        sys.stdout.write(text)


def _style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return "cyan" if line.startswith("@@") else ""


def apply_command(session_id: SessionArg) -> None:
    """Apply a session's change to the checkout, all or nothing; conflicts are reported."""
    raise typer.Exit(_decide(session_id, apply=True))


def discard_command(session_id: SessionArg) -> None:
    """Throw away the change a session left in its overlay; the checkout is not touched."""
    raise typer.Exit(_decide(session_id, apply=False))


def _decide(session_id: str, *, apply: bool) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        settings = _settings(Path.cwd())
        store = app.open_store(settings)
        sid, cwd, _ = _session(store, session_id)
        if apply:
            app_workspace.refuse_cut_short(store, sid, app_workspace.tool_kinds())
        settings = _settings(_existing(sid, cwd))
        if settings.workspace != "overlay":
            settings = settings.model_copy(update={"workspace": "overlay"})
        app_workspace.prepare(settings)
        # One apply or discard per session at a time: a second one waits for the first, then
        # finds its result, instead of opening an overlay the first is taking away.
        with app_workspace.apply_lock(settings, sid):
            if app_workspace.already_applied(store, sid, settings):
                console.print(
                    f"session {sid}: its change was already applied; "
                    "no change waiting to be applied"
                )
                return 0
            view = app_workspace.open_workspace(settings, sid, cwd)
            assert view is not None  # The settings ask for an overlay.
            if not apply:
                dropped = app_workspace.discard(store, sid, settings, view)
                what = summary_line(dropped.changes) if dropped else "no change"
                console.print(f"discarded ({what}); the checkout was not touched")
                return 0
            handoff = app_workspace.apply_now(store, sid, settings, view)
    except (ConfigError, SessionNotFound, KestrelError) as exc:
        report_error(exc)
        return EXIT_USAGE
    if handoff.ready is None:
        console.print(f"session {sid} has no change waiting to be applied")
        return 0
    for event in (handoff.ready, handoff.applied):
        for line in handoff_lines(event, sid) if event else ():
            console.print(escape(line))
    return 0 if handoff.applied and handoff.applied.outcome == "applied" else EXIT_ERROR
