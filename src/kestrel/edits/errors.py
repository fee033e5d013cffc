"""Why an edit was refused: typed errors carrying structured detail and a model-facing message."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Ambiguous",
    "BlockFailure",
    "EditError",
    "EditRejected",
    "FileExists",
    "FileMissing",
    "MalformedEdit",
    "NoMatch",
]


class EditError(Exception):
    """An edit that cannot be applied; `str(error)` is the message the model sees."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


class MalformedEdit(EditError):
    """The edit text does not follow its format, or asks for something contradictory."""


class FileMissing(EditError):
    """The edit changes or deletes a file that does not exist."""


class FileExists(EditError):
    """The edit creates a file (or moves one onto a path) that already exists."""


class NoMatch(EditError):
    """The text to replace was not found at any tier of tolerance."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        closest_line: int | None = None,
        closest: tuple[str, ...] = (),
        diff: str = "",
    ) -> None:
        super().__init__(message, path=path)
        self.closest_line = closest_line
        """1-based line where the closest stretch of the file starts, if any was found."""
        self.closest = closest
        self.diff = diff


class Ambiguous(EditError):
    """The text to replace matches more than one place at the strictest tier that matches."""

    def __init__(
        self, message: str, *, path: str | None = None, lines: tuple[int, ...] = ()
    ) -> None:
        super().__init__(message, path=path)
        self.lines = lines
        """1-based first lines of every candidate."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockFailure:
    """One block (hunk, SEARCH/REPLACE block, str_replace call) that could not be applied."""

    index: int
    """1-based position of the block in the edit."""
    path: str
    error: EditError


class EditRejected(EditError):
    """Some blocks of a multi-block edit failed, so none of it was applied."""

    def __init__(
        self, message: str, *, applied: tuple[int, ...], failed: tuple[BlockFailure, ...]
    ) -> None:
        super().__init__(message)
        self.applied = applied
        """1-based indexes of the blocks that would have applied."""
        self.failed = failed
