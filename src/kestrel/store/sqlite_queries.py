"""The SQL of the SQLite store's summaries: each session with its cost, and spend over time.

The figures are read from the model calls' events (the turns, and the calls that summarised the
conversation or reranked the first context) with SQLite's JSON functions, through the partial
indexes over those rows that every open creates.
"""

from __future__ import annotations

from typing import Any

from kestrel.store.base import SessionSummary

_USAGE = "json_extract(json, '$.event.usage.{}')"
_COST = f"COALESCE(SUM({_USAGE.format('cost_usd')}), 0.0)"
_TOKENS = "COALESCE(SUM({}), 0)".format(
    " + ".join(
        _USAGE.format(name)
        for name in ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
    )
)
SPENDING = "type IN ('model_completed', 'context_compacted', 'context_added')"
"""The events a model call made (`SPENDING_TYPES`), as the partial indexes' condition: a query
uses them only when its own condition has this very term."""
SPEND_INDEXES = (
    # Partial indexes over model calls' events only: the day's spend and each session's cost
    # read a few rows instead of the whole log. Older stores get them on open; older Kestrels
    # ignore them. The first ones covered turns only (not compaction or reranking calls).
    "DROP INDEX IF EXISTS events_spend_by_time",
    "DROP INDEX IF EXISTS events_spend_by_session",
    f"CREATE INDEX IF NOT EXISTS events_usage_by_time ON events (at) WHERE {SPENDING}",
    f"CREATE INDEX IF NOT EXISTS events_usage_by_session ON events (session_id) WHERE {SPENDING}",
)
"""Run on every open, as the summaries below name them."""
# Built from the constants above only; the one value, the time, is a bound parameter.
SPENT_SINCE = (
    f"SELECT {_COST}, {_TOKENS}, COUNT({_USAGE.format('cost_usd')}) FROM events"  # noqa: S608
    f" INDEXED BY events_usage_by_time WHERE {SPENDING} AND at >= ?"
)
# The parent is read from the first event, so stores written before subagents existed need no
# migration.
_BY_SESSION = (
    f"FROM events INDEXED BY events_usage_by_session WHERE session_id = s.id AND {SPENDING}"
)
SESSIONS_WITH_COST = (
    "SELECT s.id, s.created_at, s.updated_at, s.task, s.cwd, s.model, s.last_seq,"  # noqa: S608
    f" s.status, (SELECT {_COST} {_BY_SESSION}),"
    " json_extract(e.json, '$.event.parent_session_id'),"
    f" (SELECT COALESCE(SUM(type = 'model_completed'), 0) {_BY_SESSION}),"
    f" (SELECT MIN(COALESCE({_USAGE.format('priced')}, 1)) {_BY_SESSION})"
    " FROM sessions s LEFT JOIN events e ON e.session_id = s.id AND e.seq = 1"
    " ORDER BY s.created_at DESC, s.rowid DESC"
)


def summary(row: Any) -> SessionSummary:
    """One row of `SESSIONS_WITH_COST` as a summary."""
    return SessionSummary(
        session_id=row[0],
        created_at=row[1],
        updated_at=row[2],
        task=row[3],
        cwd=row[4],
        model=row[5],
        events=row[6],
        status=row[7],
        cost_usd=float(row[8]),
        parent_session_id=row[9],
        turns=int(row[10]),
        cost_known=row[11] != 0,  # None: no model call yet, so nothing unpriced
    )
