"""The hosted sessions' pull requests the server watches, and the review round each one has under
way (the feedback sent, while the session's follow-up runs), in SQLite: a restart loses neither.

A round is `start_round` (the feedback and the log's last event number before the follow-up was
queued), then `end_round` once the fix was pushed and the comments answered, or with the reason
it could not be. A pull request whose last round failed is left alone by the periodic sync until
someone asks for a sync again, so a follow-up that keeps failing does not keep spending.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from kestrel.delivery.feedback import Feedback
from kestrel.delivery.forge import CheckRun, ReviewComment

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pulls (
    session_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    open INTEGER NOT NULL,
    next_look REAL NOT NULL,
    round TEXT,
    round_mark INTEGER,
    error TEXT NOT NULL
);
"""
_SELECT = (
    "SELECT session_id, tenant_id, number, open, next_look, round, round_mark, error FROM pulls "
)
_INSERT = (
    "INSERT OR REPLACE INTO pulls (session_id, tenant_id, number, open, next_look, round, "
    "round_mark, error) VALUES (?, ?, ?, 1, ?, NULL, NULL, '')"
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
    """The `pulls` table (SQLite, safe from several threads)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._locked() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()

    def add(self, session_id: str, tenant_id: str, number: int, next_look: float) -> None:
        """Watch a pull request just opened."""
        with self._locked() as conn:
            conn.execute(_INSERT, (session_id, tenant_id, number, next_look))

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
        with self._locked() as conn:
            done = conn.execute(
                "UPDATE pulls SET round = ?, round_mark = ?, error = '' "
                "WHERE session_id = ? AND round IS NULL",
                (text, mark, session_id),
            )
            return done.rowcount == 1

    def end_round(self, session_id: str, next_look: float, error: str = "") -> None:
        """The round is over (with `error` when it failed); look again at `next_look`."""
        with self._locked() as conn:
            conn.execute(
                "UPDATE pulls SET round = NULL, round_mark = NULL, error = ?, next_look = ? "
                "WHERE session_id = ?",
                (error[:2000], next_look, session_id),
            )

    def look_later(self, session_id: str, next_look: float, *, still_open: bool = True) -> None:
        """Nothing to do now: look again at `next_look` (never, once it is closed)."""
        with self._locked() as conn:
            conn.execute(
                "UPDATE pulls SET next_look = ?, open = ?, error = '' WHERE session_id = ?",
                (next_look, int(still_open), session_id),
            )

    def _select(self, where: str, args: tuple[object, ...]) -> list[Watched]:
        with self._locked() as conn:
            rows = conn.execute(_SELECT + where, args).fetchall()
        return [_watched(row) for row in rows]

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._conn


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
