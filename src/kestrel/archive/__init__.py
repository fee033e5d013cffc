"""Cold storage: idle sessions moved to an object store, and brought back when opened.

`Archiver` packs a session's event rows, checkpoints and folders into one object (`pack`),
stores it at the place an archive URL names (`blobs`: a local folder by default, or any
S3-compatible bucket) and leaves a tombstone in the event log. `Restorer`, given to the
stores by the composition root, brings a session back the first time it is opened (see
`restore` for why the store is the seam).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.lazy_names import lazy_attributes

if TYPE_CHECKING:
    from kestrel.archive.archiver import Archived as Archived
    from kestrel.archive.archiver import Archiver as Archiver
    from kestrel.archive.archiver import Skipped as Skipped
    from kestrel.archive.blobs import Blobs as Blobs
    from kestrel.archive.errors import ArchiveDamaged as ArchiveDamaged
    from kestrel.archive.errors import ArchiveError as ArchiveError
    from kestrel.archive.errors import ArchiveUnavailable as ArchiveUnavailable
    from kestrel.archive.restore import Restorer as Restorer

__getattr__ = lazy_attributes(
    __name__,
    {
        "Archived": "archiver",
        "Archiver": "archiver",
        "Skipped": "archiver",
        "Blobs": "blobs",
        "ArchiveDamaged": "errors",
        "ArchiveError": "errors",
        "ArchiveUnavailable": "errors",
        "Restorer": "restore",
    },
)

__all__ = [
    "ArchiveDamaged",
    "ArchiveError",
    "ArchiveUnavailable",
    "Archived",
    "Archiver",
    "Blobs",
    "Restorer",
    "Skipped",
]
