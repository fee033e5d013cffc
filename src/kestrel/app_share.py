"""A session's checkpointer, and its checkpoints in shared storage when settings ask for it.

With `workspace_share_url` set (cluster mode, each machine with a data folder of its own),
every checkpoint is put into shared storage as it is recorded, before the log names it, and a
run that starts where the session's files are behind its log (another machine ran it since, or
died in the middle) first brings the missing checkpoints over and makes the worktree hold the
newest one the log names (`catch_up`). See `kestrel.archive.share`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kestrel.agent.ports import Snapshot
from kestrel.app_sandbox import data_dir
from kestrel.app_share_writes import land_again
from kestrel.protocol.errors import StoreError
from kestrel.protocol.events import ChangedFile, ChangesApplied, CheckpointCreated
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.workspace.checkpoints import CheckpointStore
from kestrel.workspace.overlay import layer_for
from kestrel.workspace.upper_index import OverlayLayers

if TYPE_CHECKING:
    from kestrel.archive.share import WorkspaceShare

logger = logging.getLogger(__name__)

DISCARDED = "discarded"
"""The label of the checkpoint a discard logs: the files it names were thrown away."""


@dataclass(frozen=True, slots=True)
class GitCheckpointer:
    """Checkpoints in a shadow git repository in the data directory, one per workspace."""

    store: CheckpointStore

    async def snapshot(self, label: str) -> Snapshot | None:
        """Record the workspace without blocking the event loop."""
        checkpoint = await asyncio.to_thread(self.store.snapshot, label)
        if checkpoint is None:
            return None
        changes = tuple(
            ChangedFile(path=c.path, status=c.status, old_path=c.old_path)
            for c in checkpoint.changes
        )
        return Snapshot(checkpoint_id=checkpoint.id, changes=changes, tree=checkpoint.tree)

    async def restore(self, checkpoint_id: str) -> None:
        """Bring the workspace's files back to the checkpoint."""
        await asyncio.to_thread(self.store.restore, checkpoint_id)

    async def head_id(self) -> str | None:
        """The newest checkpoint recorded, logged or not (a crash may come in between)."""
        return await asyncio.to_thread(self.store.head_id)


def shadow_dir(settings: Settings, root: Path) -> Path:
    """The shadow repository of the workspace at `root`, keyed by its path."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return data_dir(settings) / "checkpoints" / key


def checkpointer_for(settings: Settings, root: Path, session_id: str) -> GitCheckpointer:
    """The checkpointer of a session: a shadow repository keyed by the workspace's path, its
    checkpoints put into shared storage as they are recorded when settings name one."""
    git_dir = shadow_dir(settings, root)
    layer = layer_for(data_dir(settings), session_id)
    # In a kernel overlay, later checkpoints look only at what the session's upper layer names;
    # the store checks that the overlay is mounted over `root` before it relies on that.
    layers = OverlayLayers(upper=layer.upper, lower=layer.lower)
    share = _share(settings, git_dir, session_id)
    on_recorded = share.put if share is not None else None
    store = CheckpointStore(
        root, git_dir, session=session_id, layers=layers, on_recorded=on_recorded
    )
    return GitCheckpointer(store)


def logged_files(store: EventStore, session_id: str) -> str | None:
    """The checkpoint whose files the session's worktree should hold, by its log: the newest
    logged one, unless the change it ends was applied or discarded since (then the worktree
    starts from the checkout again)."""
    wanted: str | None = None
    for record in store.read(session_id):
        match record.event:
            case CheckpointCreated(label=label, checkpoint_id=checkpoint_id):
                wanted = None if label == DISCARDED else checkpoint_id
            case ChangesApplied():
                wanted = None
    return wanted


def catch_up(store: EventStore, session_id: str, settings: Settings, root: Path) -> bool:
    """Make the worktree at `root` hold the files the session's log says it has, when this
    machine is behind the log; True when its files were made from a checkpoint.

    Only with `workspace_share_url`. A checkpoint recorded here but not logged yet (a crash in
    between) is ahead of the log, not behind it: the resume logs it, as on one machine. Writes
    logged after the newest checkpoint are landed again where this worktree lacks them
    (`app_share_writes`).
    """
    if settings.workspace_share_url is None:
        return False
    wanted = logged_files(store, session_id)
    if wanted is None:
        return False
    checkpoints = checkpointer_for(settings, root, session_id).store
    head = checkpoints.head_id()
    made = head is None or not (head == wanted or checkpoints.descends(head, wanted))
    if made:
        share = _share(settings, checkpoints.git_dir, session_id)
        assert share is not None
        if not share.bring(wanted):
            raise StoreError(
                f"session {session_id}: its checkpoint {wanted[:12]} is not in shared storage"
                f" ({settings.workspace_share_url}); its files cannot be made on this machine"
            )
        checkpoints.materialise(wanted)
        logger.info("session %s: files made from checkpoint %s", session_id, wanted[:12])
    landed = land_again(store, session_id, root)
    if landed:
        logger.info("session %s: %d logged write(s) landed again", session_id, landed)
    return made


def bring(settings: Settings, root: Path, session_id: str, commit: str) -> None:
    """Bring checkpoints up to `commit` from shared storage into this machine's shadow
    repository, when settings name one (to read a change another machine recorded)."""
    share = _share(settings, shadow_dir(settings, root), session_id)
    if share is not None and share.bring(commit):
        share.advance(commit)


def _share(settings: Settings, git_dir: Path, session_id: str) -> WorkspaceShare | None:
    if settings.workspace_share_url is None:
        return None
    # The object store's library is loaded only where shared storage is configured.
    from kestrel.archive.blobs import Blobs, parse
    from kestrel.archive.share import WorkspaceShare

    return WorkspaceShare(Blobs(parse(settings.workspace_share_url)), git_dir, session_id)
