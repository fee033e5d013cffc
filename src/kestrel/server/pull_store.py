"""The hosted sessions' pull requests the server watches, and the review round each one has under
way (the feedback sent, while the session's follow-up runs), in SQLite or the cluster's
PostgreSQL database: a restart loses neither.

A round is `start_round` (the feedback and the log's last event number before the follow-up was
queued), then `end_round` once the fix was pushed and the comments answered, or with the reason
it could not be. A pull request whose last round failed is left alone by the periodic sync until
someone asks for a sync again, so a follow-up that keeps failing does not keep spending.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from kestrel.delivery.feedback import Feedback
from kestrel.delivery.forge import CheckRun, ReviewComment
from kestrel.server.sql import Database, SQLiteDatabase

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS pulls (
    session_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    open INTEGER NOT NULL,
    next_look DOUBLE PRECISION NOT NULL,
    round TEXT,
    round_mark BIGINT,
    error TEXT NOT NULL
)""",
)
_SELECT = (
    "SELECT session_id, tenant_id, number, open, next_look, round, round_mark, error FROM pulls "
)
_INSERT = (
    "INSERT INTO pulls (session_id, tenant_id, number, open, next_look, round, round_mark, error)"
    " VALUES (?, ?, ?, 1, ?, NULL, NULL, '') ON CONFLICT (session_id) DO UPDATE SET"
    " tenant_id = excluded.tenant_id, number = excluded.number, open = 1,"
    " next_look = excluded.next_look, round = NULL, round_mark = NULL, error = ''"
)


@dataclass(frozen=True, slots=True)
class Watched:
    """One session's pull request as the server watches it."""

    session_id: str
    tenant_id: str
    number: int
    open: bool
    """False once the forge said it was closed or merged: it is not looked at again."""
    next_look: float
    round: Feedback | None
    """The feedback sent to the session, while its follow-up runs."""
    round_mark: int | None
    error: str
    """Why the last round failed; '' when it did not."""


class PullStore:
    """The `pulls` table (a SQLite file, or the cluster's PostgreSQL database)."""

    def __init__(self, where: Path | Database) -> None:
        self._db = SQLiteDatabase(where) if isinstance(where, Path) else where
        self._db.migrate(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def add(self, session_id: str, tenant_id: str, number: int, next_look: float) -> None:
        """Watch a pull request just opened."""
        self._db.write(lambda tx: tx.execute(_INSERT, (session_id, tenant_id, number, next_look)))

    def get(self, tenant_id: str, session_id: str) -> Watched | None:
        """The tenant's session's pull request; None for none (and for another tenant's)."""
        rows = self._select("WHERE tenant_id = ? AND session_id = ?", (tenant_id, session_id))
        return rows[0] if rows else None

    def due(self, now: float) -> list[Watched]:
        """Open pull requests whose review is due a look, with no round under way or failed."""
        where = "WHERE open = 1 AND round IS NULL AND error = '' AND next_look <= ?"
        return self._select(where + " ORDER BY next_look", (now,))

    def in_rounds(self) -> list[Watched]:
        """Pull requests with a round under way."""
        return self._select("WHERE round IS NOT NULL", ())

    def start_round(self, session_id: str, feedback: Feedback, mark: int) -> bool:
        """Record the feedback sent; False (nothing changed) when a round is under way."""
        text = json.dumps(asdict(feedback))
        query = (
            "UPDATE pulls SET round = ?, round_mark = ?, error = '' "
            "WHERE session_id = ? AND round IS NULL"
        )
        return self._db.write(lambda tx: tx.execute(query, (text, mark, session_id)).rowcount == 1)

    def end_round(self, session_id: str, next_look: float, error: str = "") -> None:
        """The round is over (with `error` when it failed); look again at `next_look`."""
        query = (
            "UPDATE pulls SET round = NULL, round_mark = NULL, error = ?, next_look = ? "
            "WHERE session_id = ?"
        )
        self._db.write(lambda tx: tx.execute(query, (error[:2000], next_look, session_id)))

    def look_later(self, session_id: str, next_look: float, *, still_open: bool = True) -> None:
        """Nothing to do now: look again at `next_look` (never, once it is closed)."""
        query = "UPDATE pulls SET next_look = ?, open = ?, error = '' WHERE session_id = ?"
        args = (next_look, int(still_open), session_id)
        self._db.write(lambda tx: tx.execute(query, args))

    def _select(self, where: str, args: tuple[object, ...]) -> list[Watched]:
        rows = self._db.read(lambda tx: tx.execute(_SELECT + where, args).rows)
        return [_watched(row) for row in rows]


def _watched(row: tuple[object, ...]) -> Watched:
    session_id, tenant_id, number, is_open, next_look, round_text, mark, error = row
    return Watched(
        session_id=str(session_id),
        tenant_id=str(tenant_id),
        number=int(str(number)),
        open=bool(is_open),
        next_look=float(str(next_look)),
        round=_feedback(str(round_text)) if round_text is not None else None,
        round_mark=None if mark is None else int(str(mark)),
        error=str(error),
    )


def _feedback(text: str) -> Feedback:
    data = json.loads(text)
    return Feedback(
        number=int(data["number"]),
        comments=tuple(ReviewComment(**c) for c in data["comments"]),
        failed=tuple(CheckRun(**r) for r in data["failed"]),
    )
