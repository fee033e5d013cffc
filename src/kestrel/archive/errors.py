"""How archiving and restoring fail: store errors, so every frontend reports them as one line."""

from __future__ import annotations

from kestrel.protocol.errors import StoreError


class ArchiveError(StoreError):
    """Archiving or restoring a session failed; the message says why and what was kept."""


class ArchiveUnavailable(ArchiveError):
    """The object store could not be reached, or refused a read or a write."""


class ArchiveDamaged(ArchiveError):
    """An archived object is not what was stored: its checksum or its contents do not match."""
