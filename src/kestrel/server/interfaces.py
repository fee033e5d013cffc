"""What the hosted mode needs of its event log and of whatever runs its sessions, so that one
machine (SQLite, the in-process `workers.Pool`) and a cluster (PostgreSQL, the durable queue of
`cluster_mode.ClusterRuns`) are the same server to the routes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kestrel.server.registry import Hosted, Status
from kestrel.store.base import EventStore


class HostedLog(EventStore, Protocol):
    """The event log, with the one query the fan-out and the plans' spend need besides."""

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The number of the last event of each named session that has any."""
        ...


class SessionRuns(Protocol):
    """Runs hosted sessions: queues them, takes them out of the queue, stops them."""

    def start(self) -> None:
        """Begin (in the running event loop)."""
        ...

    def submit(
        self, hosted: Hosted, message: str | None = None, *, only_if: Status | None = None
    ) -> bool:
        """Queue the session's next run with the message it sends (None: continue as logged);
        with `only_if`, only a session in that status (False otherwise). Any thread."""
        ...

    async def withdraw(self, session_id: str) -> bool:
        """Take a queued session out of the queue; False when it is not queued."""
        ...

    async def terminate(self, session_id: str) -> bool:
        """Stop a run that has not logged its start yet (a cancel event would not reach it);
        False when none runs."""
        ...

    def workers(self) -> int:
        """How many workers take runs now: the server's own pool, or the cluster's live ones."""
        ...

    async def stop(self, grace_s: float = 20.0) -> None:
        """Stop taking work."""
        ...
