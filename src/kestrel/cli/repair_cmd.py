"""`kestrel doctor --repair`, and the doctor's line about the event store.

A damaged store stops every command with a line that points here; the repair saves what can be
read into a new store, so new sessions work again, and keeps the damaged file beside it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kestrel.cli.doctor_model import DoctorCheck
from kestrel.cli.drive import EXIT_DONE, EXIT_ERROR
from kestrel.protocol.oserrors import os_error_text
from kestrel.store import STORE_FILE_NAME, SQLiteStore, StoreError
from kestrel.store.repair import damage, salvage

REPAIR_FIX = "kestrel doctor --repair (saves what can be read, keeps the damaged file)"


def store_check(data: Path) -> DoctorCheck:
    """Whether the event store in `data` opens and passes SQLite's own consistency check."""
    path = data / STORE_FILE_NAME
    if not path.exists():
        return DoctorCheck("event store", "ok", f"{path}: not created yet")
    problem = damage(path)
    if problem is not None:
        return DoctorCheck("event store", "fail", problem, REPAIR_FIX)
    try:
        with SQLiteStore(path, warn=lambda _: None) as store:
            held = store.quarantined()
    except StoreError as exc:
        return DoctorCheck("event store", "fail", str(exc), REPAIR_FIX)
    if held:
        noun = "event" if held == 1 else "events"
        detail = f"{path}: intact; {held} unreadable {noun} set aside in its quarantine table"
        return DoctorCheck("event store", "info", detail)
    return DoctorCheck("event store", "ok", f"{path}: intact")


def repair_store(data: Path) -> int:
    """Salvage the event store in `data` if it is damaged; print one line; return the exit code."""
    path = data / STORE_FILE_NAME
    problem = damage(path)
    if problem is None:
        typer.echo(f"kestrel: the event store {path} is intact; nothing to repair")
        return EXIT_DONE
    try:
        saved = salvage(path)
    except OSError as exc:
        typer.echo(f"kestrel: could not repair {path}: {os_error_text(exc)}", err=True)
        return EXIT_ERROR
    sessions = f"{saved.sessions} session{'s' * (saved.sessions != 1)}"
    events = f"{saved.events} event{'s' * (saved.events != 1)}"
    typer.echo(
        f"kestrel: repaired the event store {path}: saved {sessions} and {events}; "
        f"the damaged file is kept as {saved.broken}"
    )
    return EXIT_DONE
