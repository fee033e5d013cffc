"""Helpers shared by the event store tests."""

from __future__ import annotations

from kestrel.protocol.events import SessionStarted


class Clock:
    """A clock that moves one second each time it is read, so orderings are deterministic."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def started(session_id: str, task: str = "fix the tests") -> SessionStarted:
    """A `session_started` event for `session_id`."""
    return SessionStarted(session_id=session_id, task=task, cwd="/src/project", model="scripted:m")
