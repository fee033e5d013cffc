"""What a tenant's sessions spent since a moment: the daily budgets of its plan count this."""

from __future__ import annotations

from collections.abc import Sequence

from kestrel.agent.state import replay
from kestrel.server.interfaces import HostedLog


def spent_since(store: HostedLog, session_ids: Sequence[str], since: float) -> tuple[int, float]:
    """Tokens and dollars the sessions spent from `since` on (a Unix time).

    A session that began before `since` counts only what it spent after; one whose last event
    is older is skipped after reading that event alone.
    """
    tokens, usd = 0, 0.0
    for session_id, last in store.last_seqs(session_ids).items():
        tail = store.read(session_id, max(last - 1, 0))
        if not tail or tail[-1].at < since:
            continue
        records = store.read(session_id)
        now = replay(records).totals
        before = replay([r for r in records if r.at < since]).totals
        tokens += now.tokens - before.tokens
        usd += now.cost_usd - before.cost_usd
    return tokens, max(usd, 0.0)
