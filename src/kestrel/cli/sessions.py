"""`kestrel sessions`: list, show and export sessions from the event log."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kestrel import app as composition
from kestrel.cli.drive import EXIT_USAGE, report_error
from kestrel.cli.render import ConsoleFrontend
from kestrel.evals.html_trajectory import render_trajectory
from kestrel.protocol.codec import record_to_json
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.protocol.events import (
    CheckpointCreated,
    Record,
    Rewound,
    SessionStarted,
    SubagentFinished,
    SubagentStarted,
)
from kestrel.settings_load import load_settings
from kestrel.store.base import EventStore

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="List, show and export sessions.",
)


def _store() -> EventStore:
    settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
    return composition.open_store(settings)


def _fail(exc: Exception) -> typer.Exit:
    report_error(exc)
    return typer.Exit(EXIT_USAGE)


@app.command("list")
def list_sessions(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most this many.")] = 50,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Also list subagents' sessions, marked.")
    ] = False,
) -> None:
    """Sessions, newest first (subagents' sessions only with --all)."""
    try:
        store = _store()
    except ConfigError as exc:
        raise _fail(exc) from exc
    rows = [r for r in store.sessions() if show_all or r.parent_session_id is None][:limit]
    store.close()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "session_id": r.session_id,
                        "created_at": r.created_at,
                        "updated_at": r.updated_at,
                        "task": r.task,
                        "cwd": r.cwd,
                        "model": r.model,
                        "events": r.events,
                        "status": r.status,
                        "parent_session_id": r.parent_session_id,
                        "cost_usd": r.cost_usd,
                    }
                    for r in rows
                ],
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    table = Table("id", "updated", "status", "events", "cost", "task", "cwd", box=None)
    for r in rows:
        when = dt.datetime.fromtimestamp(r.updated_at).strftime("%Y-%m-%d %H:%M")
        table.add_row(
            r.session_id,
            when,
            r.status,
            str(r.events),
            f"${r.cost_usd:.4f}",
            _task_cell(r.task, r.parent_session_id),
            r.cwd,
        )
    Console(highlight=False).print(table if rows else "no sessions yet")


def _task_cell(task: str, parent: str | None) -> str:
    """The task's first line; a subagent's is marked with the session that started it."""
    first = task.splitlines()[0][:60] if task else ""
    return escape(first if parent is None else f"subagent of {parent}: {first}")


def _records(session_id: str) -> list[Record]:
    """Every record of the session named by id or prefix; a clear error when there is none."""
    try:
        store = _store()
    except ConfigError as exc:
        raise _fail(exc) from exc
    try:
        return list(store.read(store.resolve(session_id)))
    except SessionNotFound as exc:
        raise _fail(exc) from exc
    finally:
        store.close()


@app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    html: Annotated[
        bool, typer.Option("--html", help="Write the session as a self-contained HTML page.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where --html writes the page (default: the session's artifacts folder).",
        ),
    ] = None,
) -> None:
    """The session's transcript, as the interactive view showed it, or as an HTML page."""
    if output is not None and not html:
        raise _fail(ConfigError("--output goes with --html"))
    records = _records(session_id)
    if html:
        print(_write_html(records, output))
        return
    console = Console(highlight=False)
    view = ConsoleFrontend(console)
    for record in records:
        view.render(record)
    for line in subagent_lines(records):
        console.print(line, markup=False, soft_wrap=True)


def subagent_lines(records: list[Record]) -> list[str]:
    """The session's parent and its subagents' sessions, one line each; empty when none."""
    lines: list[str] = []
    first = records[0].event if records else None
    if isinstance(first, SessionStarted) and first.parent_session_id is not None:
        lines.append(
            f"subagent session of {first.parent_session_id} (task call {first.parent_call_id})"
        )
    finished = {r.event.call_id: r.event for r in records if isinstance(r.event, SubagentFinished)}
    started = [r.event for r in records if isinstance(r.event, SubagentStarted)]
    if started:
        lines.append(f"subagents ({len(started)}):")
    for event in started:
        end = finished.get(event.call_id)
        status = "running or interrupted"
        if end is not None:
            t = end.totals
            status = f"{end.reason}, {t.turns} turns, {t.tokens} tokens, ${t.cost_usd:.4f}"
        lines.append(f"  {event.child_session_id}  {event.agent}: {event.description} ({status})")
    return lines


def _write_html(records: list[Record], output: Path | None) -> Path:
    """Render the trajectory page and write it; print nothing, return where it went."""
    session_id = records[0].session_id
    if output is None:
        settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
        output = composition.data_dir(settings) / "artifacts" / session_id / "trajectory.html"
    elif output.is_dir():
        output = output / f"{session_id}.html"
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render_trajectory(records), encoding="utf-8")
    except OSError as exc:
        raise _fail(ConfigError(f"{output}: cannot write the page: {exc.strerror or exc}")) from exc
    return output.resolve()


@app.command("export")
def export(session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")]) -> None:
    """Every event of the session as JSON Lines, in the documented schema."""
    for record in _records(session_id):
        print(record_to_json(record))


def print_checkpoints(session_id: str) -> None:
    """List a session's checkpoints from its log; rewound ones are marked."""
    records = _records(session_id)
    rewound_ranges = [(r.event.to_seq, r.seq) for r in records if isinstance(r.event, Rewound)]
    console = Console(highlight=False)
    shown = 0
    for record in records:
        event = record.event
        if not isinstance(event, CheckpointCreated):
            continue
        shown += 1
        undone = any(start < record.seq < end for start, end in rewound_ranges)
        mark = " [dim](rewound)[/dim]" if undone else ""
        when = dt.datetime.fromtimestamp(record.at).strftime("%H:%M:%S")
        console.print(
            f"[bold]{event.checkpoint_id[:12]}[/bold]  {when}  event {record.seq}  "
            f"{event.label}{mark}"
        )
        for change in event.changes:
            old = f"{change.old_path} -> " if change.old_path else ""
            console.print(f"    {change.status} {old}{change.path}", soft_wrap=True)
        if event.more_changes:
            console.print(f"    … and {event.more_changes} more")
    if not shown:
        console.print("no checkpoints yet: they are recorded when a tool changes files")
