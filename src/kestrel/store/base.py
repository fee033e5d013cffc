"""The interface of the append-only event log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kestrel.protocol.events import Event, Record


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """One line of `kestrel sessions list`."""

    session_id: str
    created_at: float
    updated_at: float
    task: str
    cwd: str
    model: str
    events: int
    status: str
    """`running` until a `session_finished` event, then its reason (`done`, `budget`, ...)."""
    parent_session_id: str | None = None
    """For a subagent's session, the session that started it; None for a person's session."""
    cost_usd: float = 0.0
    """What the session's model calls cost so far, in US dollars."""
    turns: int = 0
    """How many model calls the session has completed."""
    cost_known: bool = True
    """False when some model call had no price, so `cost_usd` is only a lower bound."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """What model calls cost over a span of time, across every session of the store."""

    cost_usd: float = 0.0
    tokens: int = 0
    """Input (cached or not) plus output tokens."""
    calls: int = 0
    """How many model calls completed in the span."""


class EventStore(Protocol):
    """Append-only, per-session event log with monotonically increasing sequence numbers.

    `append` returns only once the event is durable: a process killed right after it returns loses
    nothing. Subscribers see every event in order, from any sequence number.
    """

    def append(self, session_id: str, event: Event) -> Record:
        """Make `event` durable as the next record of `session_id` and return that record."""
        ...

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """Every record of the session with `seq > after_seq`, in order."""
        ...

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """Records with `seq > after_seq`, then each new one as it is appended; never ends."""
        ...

    def sessions(self) -> Sequence[SessionSummary]:
        """Every session, newest first."""
        ...

    def spent_since(self, since: float) -> Spend:
        """What every model call recorded at or after `since` spent: the turns, and the calls
        that summarised a conversation or reranked a first context."""
        ...

    def resolve(self, id_or_prefix: str) -> str:
        """The full id of the one session whose id starts with the argument.

        Raises `kestrel.protocol.errors.SessionNotFound` for none, or for more than one.
        """
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...
