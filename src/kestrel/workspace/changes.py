"""A session's change to a checkout as values: what each path was when the session began and
what the session left there.

These are pure data. The overlay produces them (`Overlay.changes`), the review shows them and the
apply journal writes them to the real checkout; nothing here touches a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EntryKind = Literal["file", "symlink", "special"]
ChangeStatus = Literal["A", "M", "D", "R", "T"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One side of a path: a regular file (its bytes), a symlink (its target) or a special file.

    `special` stands for what may not be applied (devices, sockets, fifos); `data` is empty then.
    """

    kind: EntryKind
    data: bytes = b""
    executable: bool = False

    @property
    def mode(self) -> int:
        """The git-style mode: 0o100644, 0o100755 or 0o120000."""
        if self.kind == "symlink":
            return 0o120000
        return 0o100755 if self.executable else 0o100644


@dataclass(frozen=True, slots=True)
class Change:
    """One path the session changed.

    `base` is the path as the session found it (None: it did not exist); `new` is what the session
    left (None: deleted). A rename is a deletion of `old_path` plus this addition, which names
    where its content came from.
    """

    path: str
    base: Entry | None
    new: Entry | None
    old_path: str | None = None

    @property
    def status(self) -> ChangeStatus:
        """A (added), D (deleted), R (renamed), T (only the mode or kind changed) or M."""
        if self.new is None:
            return "D"
        if self.base is None:
            return "R" if self.old_path else "A"
        if self.base.data == self.new.data:
            return "T"
        return "M"


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Every change of one session, sorted by path; `base_tree` identifies the starting state."""

    changes: tuple[Change, ...]
    base_tree: str | None = None

    def __bool__(self) -> bool:
        return bool(self.changes)

    def paths(self) -> tuple[str, ...]:
        """The changed paths, in order."""
        return tuple(change.path for change in self.changes)
