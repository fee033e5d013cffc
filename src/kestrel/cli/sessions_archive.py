"""`kestrel sessions archive` and `restore`: idle sessions to cold storage, and back ahead of
time (opening an archived session restores it anyway)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kestrel.app_store import data_dir, open_archive_log
from kestrel.cli.exit_codes import EXIT_ERROR, EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.settings_load import load_settings

if TYPE_CHECKING:
    from kestrel.archive.archiver import Archived, Skipped
    from kestrel.settings import Settings
    from kestrel.store.base import SessionSummary
    from kestrel.store.tombstones import ArchiveLog

_DAY_S = 86400.0


def archive_command(
    session_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Session ids or prefixes; default: every idle one."),
    ] = None,
    idle_days: Annotated[
        float | None,
        typer.Option(
            "--idle-days",
            min=0,
            help="Only sessions idle at least this long (default: archive_idle_days, 30).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Archive even a session that is running or has a change not applied."
        ),
    ] = False,
) -> None:
    """Move idle sessions (their events, checkpoints and workspace) to the archive that
    `archive_url` names; each is restored when next opened."""
    from kestrel.archive.archiver import Archived, Archiver
    from kestrel.archive.blobs import Blobs, default_url, parse
    from kestrel.archive.errors import ArchiveUnavailable

    settings = _settings()
    where = data_dir(settings)
    store = _open(settings)
    try:
        chosen = _choose(store, session_ids or [], idle_days, settings)
        url = settings.archive_url or default_url(where)
        archiver = Archiver(store, where, Blobs(parse(url)))
        done: list[Archived | Skipped] = []
        try:
            for summary in chosen:
                done.append(archiver.archive(summary, force=force))
        except ArchiveUnavailable as exc:
            _report(done, url)
            report_error(exc)
            raise typer.Exit(EXIT_ERROR) from None
    except (ConfigError, SessionNotFound) as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    finally:
        store.close()
    _report(done, url)
    if session_ids and any(not isinstance(d, Archived) for d in done):
        raise typer.Exit(EXIT_ERROR)


def restore_command(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
) -> None:
    """Bring an archived session back now (opening it would too)."""
    store = _open(_settings())
    try:
        sid = store.resolve(session_id)
        if store.tombstone(sid) is None:
            print(f"session {sid} is not archived")
            return
        count = len(store.read(sid))  # reading an archived session restores it
    except SessionNotFound as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    finally:
        store.close()
    print(f"restored session {sid} ({count} events)")


def _settings() -> Settings:
    return load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())


def _open(settings: Settings) -> ArchiveLog:
    try:
        return open_archive_log(settings)
    except (ConfigError, OSError) as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None


def _choose(
    store: ArchiveLog, ids: list[str], idle_days: float | None, settings: Settings
) -> list[SessionSummary]:
    """The sessions named (each resolved), else every idle one; with `idle_days` (always, when
    none is named), only those idle that long."""
    from kestrel.archive.archiver import idle

    summaries = store.sessions()
    if ids:
        wanted = {store.resolve(raw) for raw in ids}
        summaries = [s for s in summaries if s.session_id in wanted]
    elif idle_days is None:
        idle_days = settings.archive_idle_days
    if idle_days is None:
        return list(summaries)
    return idle(summaries, idle_days * _DAY_S, time.time())


def _report(done: list[Archived | Skipped], where: str) -> None:
    from kestrel.archive.archiver import Archived, Skipped

    archived = [d for d in done if isinstance(d, Archived)]
    skipped = [d for d in done if isinstance(d, Skipped)]
    if archived:
        size = sum(a.size for a in archived)
        print(f"archived {_count(len(archived))} to {where} ({_size(size)})")
    for item in archived:
        if item.note:
            print(f"  {item.session_id}: {item.note}")
    if skipped:
        print(f"{_count(len(skipped))} not archived:")
    for left in skipped:
        print(f"  {left.session_id}  {left.reason}")
    if not done:
        print("no session to archive")


def _count(n: int) -> str:
    return f"{n} session" + ("" if n == 1 else "s")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


def register(app: typer.Typer) -> None:
    """Add `archive` and `restore` to `kestrel sessions`."""
    app.command("archive")(archive_command)
    app.command("restore")(restore_command)
