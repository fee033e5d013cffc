"""What bounds a subagent: a permission mode no wider than the parent's, and limits that are
what the parent has left, kept current while siblings spend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from kestrel.protocol.events import Event, Limits, PermissionMode, Record, Totals
from kestrel.store.base import EventStore, SessionSummary, Spend

_MODE_RANK: Mapping[PermissionMode, int] = {"plan": 0, "default": 1, "accept-edits": 2, "bypass": 3}


def narrower_mode(asked: PermissionMode | None, parent: PermissionMode) -> PermissionMode:
    """The subagent's mode: what its definition asks, but never wider than the parent's."""
    if asked is None:
        return parent
    return asked if _MODE_RANK[asked] <= _MODE_RANK[parent] else parent


def child_limits(
    limits: Limits, spent: Totals, *, max_turns: int | None, wall_left: float | None
) -> Limits:
    """What a subagent may spend: the parent's limits less what is `spent` already (by the
    parent and its other running subagents), and at most `max_turns` turns."""

    def left(limit: float | None, used: float) -> float | None:
        return None if limit is None else max(0.0, limit - used)

    turns = left(limits.max_turns, spent.turns)
    if max_turns is not None:
        turns = max_turns if turns is None else min(turns, max_turns)
    tokens = left(limits.max_tokens, spent.tokens)
    return Limits(
        max_turns=None if turns is None else int(turns),
        max_tokens=None if tokens is None else int(tokens),
        max_cost_usd=left(limits.max_cost_usd, spent.cost_usd),
        max_wall_s=wall_left,
    )


class WatchedStore:
    """The parent's store, telling the runner after each event a subagent logs."""

    def __init__(self, store: EventStore, after_append: Callable[[], None]) -> None:
        self._store = store
        self._after = after_append

    def append(self, session_id: str, event: Event) -> Record:
        """Append to the real store, then let the runner rebalance the budgets."""
        record = self._store.append(session_id, event)
        self._after()
        return record

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """As the real store."""
        return self._store.read(session_id, after_seq)

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """As the real store."""
        return self._store.subscribe(session_id, after_seq)

    def sessions(self) -> Sequence[SessionSummary]:
        """As the real store."""
        return self._store.sessions()

    def resolve(self, id_or_prefix: str) -> str:
        """As the real store."""
        return self._store.resolve(id_or_prefix)

    def spent_since(self, since: float) -> Spend:
        """As the real store."""
        return self._store.spent_since(since)

    def close(self) -> None:
        """Nothing: the parent owns the store."""
