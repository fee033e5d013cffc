"""One apply per session at a time, across processes, and a marker for each apply in flight.

`<data>/applies/` holds, per session:

    <session>.lock   flock'd by the process applying (or discarding) the session's change; the
                     kernel releases it when that process dies, however it dies
    <session>.json   the marker: written just before the apply's journal commits, rewritten once
                     every file is in place, removed when the apply is logged and cleaned up

A marker whose lock nobody holds belongs to an apply that was killed. `finish_interrupted`, which
every command that opens the event store runs first, finds those (one `listdir`, cheap when there
are none), finishes or rolls back the apply from its journal, logs the `changes_applied` event an
apply that finished never logged, drops the session's layer after a finished apply, and removes
the marker.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kestrel.workspace.journal import ApplyError, recover
from kestrel.workspace.overlay import discard_layer, layer_for

if TYPE_CHECKING:
    # Imported where used: every command checks for an interrupted apply, and most find none.
    from kestrel.protocol.events import ChangesApplied, Event, Record

APPLIES = "applies"
WAIT_S = 5.0
"""How long a second apply of one session waits for the first before saying it is running."""
_POLL_S = 0.05

Phase = Literal["applying", "performed"]


class ApplyBusy(ApplyError):
    """Another process is applying or discarding this session's change right now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Marker:
    """An apply in flight, in paths every process sees (inside a session's namespace or not)."""

    session_id: str
    checkout: str
    journal: str
    named: str | None
    """How the journal names its checkout when the apply reached it by another path."""
    phase: Phase
    event: dict[str, Any]
    """The `changes_applied` event the apply logs once done (its fields)."""

    def applied(self) -> ChangesApplied:
        """The event this apply logs when it finished."""
        from kestrel.protocol.codec import DecodeError, event_from_dict
        from kestrel.protocol.events import ChangesApplied

        try:
            event = event_from_dict(self.event)
        except DecodeError:
            event = None
        if not isinstance(event, ChangesApplied):
            raise ApplyError(f"the apply marker of session {self.session_id} names no apply")
        return event


class SessionLog(Protocol):
    """The part of the event store that repairing needs."""

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """The session's records."""
        ...

    def append(self, session_id: str, event: Event) -> Record:
        """Log an event."""
        ...


@dataclass(frozen=True, slots=True)
class Repaired:
    """What became of an apply a killed process left: finished (and logged) or rolled back."""

    session_id: str
    action: Literal["completed", "rolled_back"]


_held: dict[Path, tuple[int, int]] = {}
"""Locks this process holds: path -> (fd, depth), so that a holder may take its lock again."""


def _folder(data_dir: Path) -> Path:
    return data_dir / APPLIES


@contextlib.contextmanager
def session_lock(data_dir: Path, session_id: str, *, wait_s: float = WAIT_S) -> Iterator[bool]:
    """Hold the session's apply lock; yields whether another process held it first.

    Waits up to `wait_s` seconds, then raises `ApplyBusy`.
    """
    path = _folder(data_dir) / f"{session_id}.lock"
    if path in _held:
        fd, depth = _held[path]
        _held[path] = (fd, depth + 1)
        try:
            yield False
        finally:
            _held[path] = (fd, depth)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        waited = _acquire(fd, wait_s, session_id)
        _held[path] = (fd, 1)
        try:
            yield waited
        finally:
            del _held[path]
    finally:
        os.close(fd)  # releases the lock


def _acquire(fd: int, wait_s: float, session_id: str) -> bool:
    deadline = time.monotonic() + wait_s
    waited = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return waited
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ApplyBusy(
                    f"another kestrel process is applying or discarding the change of session "
                    f"{session_id} right now; try again when it has finished"
                ) from None
            waited = True
            time.sleep(_POLL_S)


def write_marker(data_dir: Path, marker: Marker) -> None:
    """Record (or update) the session's apply in flight; a crash leaves the old or new one."""
    folder = _folder(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f"{marker.session_id}.json.tmp"
    with open(temp, "w", encoding="utf-8") as stream:
        json.dump(asdict(marker), stream)
    os.replace(temp, folder / f"{marker.session_id}.json")


def remove_marker(data_dir: Path, session_id: str) -> None:
    """Forget the session's apply: it is logged and cleaned up, or never touched the checkout."""
    with contextlib.suppress(FileNotFoundError):
        (_folder(data_dir) / f"{session_id}.json").unlink()


def _read_marker(data_dir: Path, session_id: str) -> Marker | None:
    file = _folder(data_dir) / f"{session_id}.json"
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        return Marker(**raw)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as error:
        raise ApplyError(f"the apply marker {file} cannot be read ({error})") from None


def finish_interrupted(data_dir: Path, log: SessionLog) -> list[Repaired]:
    """Finish or roll back every apply whose process died; skip those still running."""
    folder = _folder(data_dir)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    done = []
    for name in sorted(names):
        session_id, dot, ext = name.rpartition(".")
        if not dot or ext != "json" or "." in session_id:
            continue
        if (folder / f"{session_id}.lock") in _held:
            continue  # this process's own apply
        try:
            with session_lock(data_dir, session_id, wait_s=0):
                repaired = _repair(data_dir, session_id, log)
        except ApplyBusy:
            continue  # a live process is applying it
        if repaired is not None:
            done.append(repaired)
    return done


def _repair(data_dir: Path, session_id: str, log: SessionLog) -> Repaired | None:
    marker = _read_marker(data_dir, session_id)
    if marker is None:
        return None  # finished between the listing and the lock
    if not Path(marker.checkout).is_dir():
        remove_marker(data_dir, session_id)  # the checkout is gone: nothing left to repair
        return None
    try:
        result = recover(Path(marker.checkout), Path(marker.journal), named=marker.named)
    except ApplyError as error:
        raise ApplyError(
            f"session {session_id}'s apply to {marker.checkout} was cut short and its journal "
            f"cannot be replayed ({error})"
        ) from None
    finished = (result is not None and result.action == "completed") or (
        result is None and marker.phase == "performed"
    )
    if finished:
        event = marker.applied()
        if not _logged(log, session_id, event):
            log.append(session_id, event)
        discard_layer(layer_for(data_dir, session_id))
    remove_marker(data_dir, session_id)
    if result is None and not finished:
        return None  # never committed: the checkout was not touched
    return Repaired(session_id, "completed" if finished else "rolled_back")


def _logged(log: SessionLog, session_id: str, event: ChangesApplied) -> bool:
    from kestrel.protocol.events import ChangesApplied

    for record in reversed(log.read(session_id)):
        if isinstance(record.event, ChangesApplied):
            seen = record.event
            return seen.outcome == event.outcome and seen.checkpoint_id == event.checkpoint_id
    return False
