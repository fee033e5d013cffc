"""The file writes a session logged after its newest checkpoint, landed again on a machine that
takes the session over.

A tool's writes are logged (`file_changed`: path, hashes before and after, the diff) before
they land, and the checkpoint that records them comes after the tool's batch. A worker killed
in between leaves a log whose newest checkpoint lacks those writes, while shared storage holds
only checkpoints. So after the worktree is made from that checkpoint, each such write whose file
still has its `before` content is applied again from its logged diff (by the edit engine, as a
unified diff) and kept only when the result has exactly its `after` hash. A write that cannot be
landed so (a diff cut for length, a binary file, a file changed otherwise) is reported as a
recoverable error naming the file, never guessed. Commands' effects are not logged as writes:
those after the newest checkpoint do not travel (see docs/deploy.md).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from kestrel.edits import EditError, apply_edit
from kestrel.protocol.events import (
    ChangesApplied,
    CheckpointCreated,
    ErrorOccurred,
    FileChanged,
)
from kestrel.store.base import EventStore

logger = logging.getLogger(__name__)


def writes_after_checkpoint(store: EventStore, session_id: str) -> list[FileChanged]:
    """The writes logged after the session's newest checkpoint (or hand-over), in order."""
    writes: list[FileChanged] = []
    for record in store.read(session_id):
        match record.event:
            case CheckpointCreated() | ChangesApplied():
                writes = []
            case FileChanged() as write:
                writes.append(write)
    return writes


def land_again(store: EventStore, session_id: str, root: Path) -> int:
    """Land the logged writes this worktree lacks; how many. Those it cannot land are logged
    as recoverable errors."""
    landed = 0
    for write in writes_after_checkpoint(store, session_id):
        target = _inside(root, write.path)
        now = _hash(target) if target is not None else "outside"
        if now == write.after_hash:
            continue
        if target is not None and now == write.before_hash and _land(target, write):
            landed += 1
            continue
        message = (
            f"{write.path}: a write logged on the machine that ran this session before could not"
            " be made again here; read the file before editing it"
        )
        logger.warning("session %s: %s", session_id, message)
        store.append(
            session_id,
            ErrorOccurred(error_kind="WriteNotCarried", message=message, recoverable=True),
        )
    return landed


def _land(target: Path, write: FileChanged) -> bool:
    if write.after_hash is None:
        target.unlink(missing_ok=True)
        return True
    try:
        before = target.read_text("utf-8") if target.exists() else None
    except (UnicodeDecodeError, OSError):
        return False
    files = {write.path: before} if before is not None else {}
    try:
        after = apply_edit(files, write.diff, "udiff").get(write.path)
    except EditError:
        return False
    if after is None:
        return False
    data = after.encode("utf-8")
    if hashlib.sha256(data).hexdigest() != write.after_hash:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.kestrel-carry")
    temp.write_bytes(data)
    temp.replace(target)
    return True


def _inside(root: Path, path: str) -> Path | None:
    candidate = Path(path)
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    return target if target.is_relative_to(root.resolve()) else None


def _hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError):
        return None
