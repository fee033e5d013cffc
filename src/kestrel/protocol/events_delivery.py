"""Events of delivering a session's change as a pull request, and of its review loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class PullRequestOpened:
    """The change was pushed as a branch and a pull request opened for it."""

    type: Literal["pull_request_opened"] = "pull_request_opened"
    url: str
    number: int
    repository: str
    """`owner/name` on the forge."""
    branch: str
    base: str
    commit: str
    draft: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PullRequestSynced:
    """Review comments and failed checks of the pull request were read and answered."""

    type: Literal["pull_request_synced"] = "pull_request_synced"
    number: int
    comments: tuple[int, ...] = ()
    """The review comments turned into the follow-up, by the forge's id."""
    failed_checks: tuple[str, ...] = ()
    commit: str = ""
    """The commit pushed after the follow-up; empty when nothing was pushed."""
    replied: tuple[int, ...] = ()
    """The comments answered on the forge."""
    proposed: tuple[str, ...] = ()
    """Comments that state a convention, proposed as memory entries (`kestrel memory accept`)."""
