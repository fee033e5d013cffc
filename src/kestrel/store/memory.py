"""An in-memory event store: the test double for code that takes an `EventStore`.

It keeps the contract of `SQLiteStore` (sequence numbers, session status, prefix lookup, live
subscriptions, and the same JSON round trip, so an event that cannot be stored fails here too),
but nothing outlives the object. Use it in tests of your own hooks, tools and frontends:

    store = MemoryStore()
    store.append("s1", SessionStarted(session_id="s1", task="fix it", cwd="/src", model="m"))
    assert [r.seq for r in store.read("s1")] == [1]
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace

from kestrel.protocol.codec import record_from_json, record_to_json
from kestrel.protocol.events import Event, ModelCompleted, Record, SessionStarted, spent_by
from kestrel.store._common import RUNNING, Notifier, check_append, choose, follow, status_after
from kestrel.store.base import SessionSummary, Spend


@dataclass(slots=True)
class _Session:
    summary: SessionSummary
    order: int
    lines: list[str] = field(default_factory=list)


class MemoryStore:
    """An `EventStore` held in a dict; thread-safe, one process only."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._order = itertools.count()
        self._notifier = Notifier()
        self._spends: list[tuple[float, float, int]] = []
        """(at, cost in US dollars, tokens) of every model call's event, in append order."""

    def append(self, session_id: str, event: Event) -> Record:
        """Add `event` as the session's next record and wake its subscribers."""
        with self._lock:
            session = self._sessions.get(session_id)
            check_append(session_id, event, exists=session is not None)
            at = self._clock()
            if isinstance(event, SessionStarted):
                summary = _new_summary(session_id, event, at)
                session = _Session(summary=summary, order=next(self._order))
                self._sessions[session_id] = session
            assert session is not None  # check_append refused a missing session
            seq = len(session.lines) + 1
            record = Record(session_id=session_id, seq=seq, at=at, event=event)
            # Encode now, as the real store does, so unserialisable events fail in tests too.
            session.lines.append(record_to_json(record))
            cost, turns = session.summary.cost_usd, session.summary.turns
            known = session.summary.cost_known
            if isinstance(event, ModelCompleted):
                turns += 1
            if (usage := spent_by(event)) is not None:
                known = known and usage.priced
                tokens = usage.total_input_tokens + usage.output_tokens
                self._spends.append((at, usage.cost_usd, tokens))
                cost += usage.cost_usd
            session.summary = replace(
                session.summary,
                updated_at=at,
                events=seq,
                status=status_after(session.summary.status, event),
                cost_usd=cost,
                turns=turns,
                cost_known=known,
            )
        self._notifier.notify(session_id)
        return record

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """Every record of the session after `after_seq`; an unknown session has none."""
        with self._lock:
            session = self._sessions.get(session_id)
            lines = [] if session is None else session.lines[max(after_seq, 0) :]
        return [record_from_json(line) for line in lines]

    def subscribe(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Record]:
        """Records after `after_seq`, then each new one as it is appended."""
        return follow(self.read, self._notifier, session_id, after_seq, None)

    def sessions(self) -> Sequence[SessionSummary]:
        """Every session, most recently created first."""
        with self._lock:
            sessions = list(self._sessions.values())
        sessions.sort(key=lambda s: (s.summary.created_at, s.order), reverse=True)
        return [s.summary for s in sessions]

    def spent_since(self, since: float) -> Spend:
        """What every session's model calls recorded at or after `since` cost."""
        with self._lock:
            spends = [entry for entry in self._spends if entry[0] >= since]
        return Spend(
            cost_usd=sum(cost for _, cost, _ in spends),
            tokens=sum(tokens for _, _, tokens in spends),
            calls=len(spends),
        )

    def resolve(self, id_or_prefix: str) -> str:
        """The one session id equal to, or else starting with, the argument."""
        with self._lock:
            matches = sorted(i for i in self._sessions if i.startswith(id_or_prefix))
        return choose(id_or_prefix, matches[:5], more=len(matches) > 5)

    def close(self) -> None:
        """Nothing to release; present for the protocol."""


def _new_summary(session_id: str, event: SessionStarted, at: float) -> SessionSummary:
    return SessionSummary(
        session_id=session_id,
        created_at=at,
        updated_at=at,
        task=event.task,
        cwd=event.cwd,
        model=event.model,
        events=0,
        status=RUNNING,
        parent_session_id=event.parent_session_id,
    )
