"""Opening an archived session brings it back first: the restorer the event stores call.

The seam is the store itself. Every way of opening a session, in every frontend (`kestrel
resume`, `diff`, `apply`, `rewind`, `checkpoints`, `sessions show` and `export`, the server's
routes and its workers), reads the session's log through `EventStore.read`, follows it through
`subscribe` (which reads), or writes to it through `append`, before it touches the session's
workspace or checkpoints. So the SQLite and PostgreSQL stores, given a `Restorer`, check for a
tombstone when a read finds no rows, or when an append finds the session archived, and call the
restorer before they answer: the caller then sees the session exactly as it was, and no
frontend has to know that archives exist. A narrower seam (`service.sessions.existing`, say)
would miss the commands and routes that read the log directly.

A restore takes the session's lock in the data directory (the one apply and discard take, so
none of them runs meanwhile), fetches the object, checks its SHA-256 against the tombstone,
then unpacks it and checks its manifest, its events' checksum and every member's path, puts
the checkpoints and folders back and, last, reinstates the rows in one transaction, which
drops the tombstone. A failure at any step leaves the session archived, the object where it
was, and nothing half restored that a later try would not replace.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kestrel.archive.errors import ArchiveDamaged, ArchiveError
from kestrel.store.tombstones import ArchiveLog, Tombstone
from kestrel.workspace.shadow_git import CheckpointError

WORK = "archive/work"
"""Where objects are packed, fetched and unpacked, inside the data directory (so that the
unpacked folders move into place with a rename)."""
_BUNDLES = "checkpoints"
"""The folder of an unpacked archive that holds the checkpoint bundles."""


@dataclass(frozen=True, slots=True)
class Restorer:
    """Restores archived sessions into `data_dir` and the store that calls it."""

    data_dir: Path
    wait_s: float = 60.0
    """How long to wait for another process that archives, restores or applies the session."""
    env: Mapping[str, str] | None = None
    """Where the object store's credentials come from (None: this process's environment)."""

    def __call__(self, store: ArchiveLog, tombstone: Tombstone) -> None:
        """Bring the session back, or raise an `ArchiveError` and leave it archived."""
        from kestrel.workspace.apply_lock import ApplyBusy, session_lock

        sid = tombstone.session_id
        try:
            with session_lock(self.data_dir, sid, wait_s=self.wait_s):
                current = store.tombstone(sid)
                if current is not None:  # else another process restored it meanwhile
                    self._restore(store, current)
        except ApplyBusy:
            raise ArchiveError(
                f"session {sid} is archived, and another process is archiving, restoring or "
                "applying it; try again when it has finished"
            ) from None

    def _restore(self, store: ArchiveLog, tombstone: Tombstone) -> None:
        from kestrel.archive import checkpoints, files
        from kestrel.archive.blobs import Blobs, split_location
        from kestrel.archive.pack import unpack

        sid = tombstone.session_id
        place, key = split_location(tombstone.location)
        blobs = Blobs(place, self.env)
        with work_folder(self.data_dir) as work:
            fetched = work / "object.tar.gz"
            digest, _ = blobs.fetch(key, fetched)
            if digest != tombstone.digest:
                raise ArchiveDamaged(
                    f"session {sid}: its archive {tombstone.location} does not match the "
                    f"checksum recorded when it was archived (sha256 {digest[:16]}…, expected "
                    f"{tombstone.digest[:16]}…); nothing was restored and it stays archived"
                )
            staging = work / "unpacked"
            manifest, rows = unpack(fetched, sid, staging)
            if (manifest.last_seq, manifest.rows) != (tombstone.last_seq, tombstone.rows):
                raise ArchiveDamaged(f"session {sid}: its archive is not the one its log names")
            try:
                checkpoints.put_back(self.data_dir, sid, manifest.checkpoints, staging / _BUNDLES)
                files.put_back(self.data_dir, staging, manifest.folders, manifest.xattrs)
            except (OSError, CheckpointError) as exc:
                raise ArchiveError(
                    f"session {sid} could not be put back in {self.data_dir} ({exc}); "
                    "it stays archived"
                ) from None
            store.reinstate(tombstone, rows)


@contextlib.contextmanager
def work_folder(data_dir: Path) -> Iterator[Path]:
    """A new, empty folder under the data directory's archive work area, removed afterwards."""
    parent = data_dir / WORK
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
