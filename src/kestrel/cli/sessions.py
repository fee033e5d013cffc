"""`kestrel sessions`: list, show and export sessions from the event log."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from kestrel.app_store import data_dir, open_store
from kestrel.cli.exit_codes import EXIT_CANCELLED, EXIT_USAGE, report_error
from kestrel.cli.remote_sessions import InsecureOption, ServerOption, list_remote, register
from kestrel.cli.session_list import as_json as session_json
from kestrel.cli.session_list import project_root, render_table, select
from kestrel.cli.sessions_archive import register as register_archive
from kestrel.cli.usage_text import spend_text
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.settings_load import load_settings
from kestrel.store import StoreError
from kestrel.store.base import EventStore, SessionSummary

if TYPE_CHECKING:
    from kestrel.protocol.events import Record

PICKER_SIZE = 10
"""How many of the repository's sessions `kestrel resume` offers to pick from."""
HEADLESS_SHOWN = 5
"""How many `kestrel resume` names when it needs an id and cannot ask."""

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="List, show and export sessions; with --server URL, start, follow and answer the "
    "sessions of a `kestrel serve` server.",
)


def _store() -> EventStore:
    """The event store the settings here name; every failure to open it is a `ConfigError`."""
    settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
    where = data_dir(settings)
    try:
        return open_store(settings)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        reason = exc.strerror or "unknown error"
        raise ConfigError(f"cannot open the sessions in {where}: {reason}") from None
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open the sessions in {where}: {exc}") from None


def _fail(exc: Exception) -> typer.Exit:
    report_error(exc)
    return typer.Exit(EXIT_USAGE)


@app.command("list")
def list_sessions(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, for scripts.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most this many.")] = 50,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Every project's sessions, with a project column.")
    ] = False,
    subagents: Annotated[
        bool, typer.Option("--subagents", help="Also list subagents' sessions, marked.")
    ] = False,
    server: ServerOption = None,
    insecure: InsecureOption = False,
) -> None:
    """This repository's sessions, most recently active first (every project's with --all);
    with --server, the sessions of the API token's tenant on that server."""
    if server:
        list_remote(server, insecure=insecure, as_json=as_json, limit=limit)
        return
    root = project_root(Path.cwd().resolve())
    try:
        store = _store()
    except ConfigError as exc:
        raise _fail(exc) from exc
    try:
        everything = store.sessions()
    finally:
        store.close()
    rows = select(everything, None if show_all else root, subagents=subagents)[:limit]
    if as_json:
        print(json.dumps([session_json(r) for r in rows], ensure_ascii=False, indent=2))
        return
    if not rows:
        print(_nothing_listed(root, show_all, elsewhere=len(select(everything, None))))
        return
    print("\n".join(render_table(rows, with_project=show_all)))


def _nothing_listed(root: Path, show_all: bool, *, elsewhere: int) -> str:
    start = 'start one with: kestrel "what to do"'
    if show_all or not elsewhere:
        return f"No sessions yet: {start}"
    other = "session" if elsewhere == 1 else "sessions"
    return (
        f"No sessions in {root} yet: {start} "
        f"({elsewhere} {other} in other projects: kestrel sessions list --all)"
    )


def choose_session(*, headless: bool) -> str:
    """The session `kestrel resume` with no id continues: picked on a terminal, else exit 2."""
    root = project_root(Path.cwd().resolve())
    try:
        store = _store()
    except ConfigError as exc:
        raise _fail(exc) from exc
    try:
        rows = select(store.sessions(), root)[:PICKER_SIZE]
    finally:
        store.close()
    if headless or not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(needs_id_message(rows, root), file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    if not rows:
        start = 'start one with: kestrel "what to do"'
        raise _fail(ConfigError(f"no sessions in {root} to resume yet; {start}"))
    return pick(rows, root)


def needs_id_message(rows: list[SessionSummary], root: Path) -> str:
    """What `kestrel resume` says without a session id where it cannot ask which one."""
    head = "kestrel resume needs a session id: kestrel resume ID [MESSAGE]"
    if not rows:
        return f'{head}; there are no sessions in {root} yet (start one: kestrel "what to do")'
    lines = [f"{head}; the newest in {root}:"]
    lines += ["  " + line for line in render_table(rows[:HEADLESS_SHOWN])]
    return "\n".join(lines)


def pick(rows: list[SessionSummary], root: Path) -> str:
    """Ask which of `rows` to resume on the terminal; Enter is the newest, q quits (exit 0)."""
    print(f"Sessions in {root}, most recent first:")
    print("\n".join(render_table(rows, numbered=True)))
    while True:
        try:
            answer = input(f"Resume which? 1-{len(rows)}, Enter = 1, q = quit: ")
        except EOFError:
            print()
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            print()
            raise typer.Exit(EXIT_CANCELLED) from None
        answer = answer.strip().lower()
        if answer in ("q", "quit"):
            raise typer.Exit(0)
        if not answer:
            return rows[0].session_id
        if answer.isdigit() and 1 <= int(answer) <= len(rows):
            return rows[int(answer) - 1].session_id
        print(f"Type a number from 1 to {len(rows)}, Enter for the newest, or q to quit.")


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
    server: ServerOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --server: the session and its events as JSON.")
    ] = False,
    insecure: InsecureOption = False,
) -> None:
    """The session's transcript, as the interactive view showed it, or as an HTML page; with
    --server, a session on that server, where it stands and what it waits on."""
    if output is not None and not html:
        raise _fail(ConfigError("--output goes with --html"))
    if as_json and (html or not server):
        said = "--json goes with --server, not with --html; the local log as JSON: sessions export"
        raise _fail(ConfigError(said))
    if server:
        from kestrel.cli.remote_sessions import show_remote

        records = show_remote(server, session_id, insecure=insecure, as_json=as_json, quiet=html)
        if html and records:
            print(_write_html(records, output))
        return
    records = _records(session_id)
    if html:
        print(_write_html(records, output))
        return
    from kestrel.cli.render import ConsoleFrontend

    console = Console(highlight=False)
    view = ConsoleFrontend(console)
    for record in records:
        view.render(record)
    for line in subagent_lines(records):
        console.print(line, markup=False, soft_wrap=True)


def subagent_lines(records: list[Record]) -> list[str]:
    """The session's parent and its subagents' sessions, one line each; empty when none."""
    from kestrel.protocol.events import SessionStarted, SubagentFinished, SubagentStarted

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
            status = f"{end.reason}, {t.turns} turns, {spend_text(t)}"
        lines.append(f"  {event.child_session_id}  {event.agent}: {event.description} ({status})")
    return lines


def _write_html(records: list[Record], output: Path | None) -> Path:
    """Render the trajectory page and write it; print nothing, return where it went."""
    session_id = records[0].session_id
    if output is None:
        settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
        output = data_dir(settings) / "artifacts" / session_id / "trajectory.html"
    elif output.is_dir():
        output = output / f"{session_id}.html"
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        from kestrel.evals.html_trajectory import render_trajectory

        output.write_text(render_trajectory(records), encoding="utf-8")
    except OSError as exc:
        raise _fail(ConfigError(f"{output}: cannot write the page: {exc.strerror or exc}")) from exc
    return output.resolve()


@app.command("export")
def export(session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")]) -> None:
    """Every event of the session as JSON Lines, in the documented schema."""
    from kestrel.protocol.codec import record_to_json

    for record in _records(session_id):
        print(record_to_json(record))


def print_checkpoints(session_id: str) -> None:
    """List a session's checkpoints from its log; rewound ones are marked."""
    from kestrel.protocol.events import CheckpointCreated, Rewound

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


register(app)  # `create`, `follow`, `send` and the others that talk to a server.
register_archive(app)  # `archive` and `restore`: cold storage of idle sessions.
