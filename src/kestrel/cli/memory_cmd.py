"""`kestrel memory list|add|rm|accept`: the conventions every new session starts with."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.memory_store import Entry, MemoryEntryError, Scope, add, entries, remove
from kestrel.protocol.errors import ConfigError, KestrelError, SessionNotFound

app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True)

ScopeOption = Annotated[
    Literal["project", "user"],
    typer.Option(
        "--scope",
        "-s",
        help="project: the repository's .kestrel/memory.md (shared with it); user: yours, in "
        "every repository.",
    ),
]


@app.callback()
def memory() -> None:
    """Conventions Kestrel remembers (from reviews, or added by you); see docs/delivery.md."""


@app.command("list")
def list_command() -> None:
    """List the entries new sessions here start with, with their ids and sources."""
    found = entries(_repository(), _user_dir())
    if not found:
        typer.echo("nothing remembered yet; `kestrel memory add TEXT` adds a convention")
    for entry in found:
        source = f"  ({entry.source})" if entry.source else ""
        typer.echo(f"{entry.id}  [{entry.scope}]  {entry.text}{source}")


@app.command("add")
def add_command(
    text: Annotated[str, typer.Argument(help="One convention, e.g. 'Use httpx, not requests.'")],
    scope: ScopeOption = "project",
) -> None:
    """Remember a convention."""
    _guard(lambda: _added(add(scope, _repository(), _user_dir(), text, "added by hand")))


@app.command("rm")
def rm_command(
    entry_id: Annotated[str, typer.Argument(help="The entry's id (or its start), from list.")],
) -> None:
    """Forget an entry."""
    _guard(lambda: typer.echo(f"forgot: {remove(entry_id, _repository(), _user_dir()).text}"))


@app.command("accept")
def accept_command(
    session_id: Annotated[str, typer.Argument(help="The session whose proposals to keep.")],
    scope: ScopeOption = "project",
) -> None:
    """Keep the conventions `kestrel pr sync` proposed from a session's review comments."""
    _guard(lambda: _accept(session_id, scope))


def _accept(raw_id: str, scope: Scope) -> None:
    from kestrel import app as kestrel_app
    from kestrel.protocol.events import PullRequestSynced
    from kestrel.service.review import settings_at

    store = kestrel_app.open_store(settings_at(Path.cwd()))
    try:
        session_id = store.resolve(raw_id)
        events = [r.event for r in store.read(session_id)]
    finally:
        store.close()
    synced = [e for e in events if isinstance(e, PullRequestSynced)]
    proposed = list(dict.fromkeys(text for e in synced for text in e.proposed))
    if not proposed:
        typer.echo(f"session {session_id} has no proposed conventions")
        return
    known = {e.text for e in entries(_repository(), _user_dir())}
    for text in proposed:
        if " ".join(text.split()) in known:
            typer.echo(f"already remembered: {text}")
            continue
        number = next(e.number for e in synced if text in e.proposed)
        _added(add(scope, _repository(), _user_dir(), text, f"review of pull request #{number}"))


def _added(entry: Entry) -> None:
    typer.echo(f"remembered ({entry.id}, {entry.scope}): {entry.text}")


def _guard(work: Callable[[], None]) -> None:
    try:
        work()
    except (MemoryEntryError, ConfigError, SessionNotFound, KestrelError, OSError) as exc:
        report_error(ConfigError(str(exc)))
        raise typer.Exit(EXIT_USAGE) from None


def _repository() -> Path:
    from kestrel.agent.prompt import repository_root

    return repository_root(Path.cwd().resolve())


def _user_dir() -> Path:
    from kestrel.settings_load import user_settings_path

    return user_settings_path(env=os.environ, home=Path.home()).parent
