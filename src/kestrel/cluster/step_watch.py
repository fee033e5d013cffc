"""A run's steps as metrics: the worker reads what the session's process logs while it runs.

The session runs in a process of its own, so its steps are observed from the log it writes:
each model call's time (from `model_request_started` to `model_completed`, by the records'
append times), each tool call's time (`tool_finished.duration_ms`), and each command a tool
started (`bash` with an exit code or cut short after starting: one sandbox each when the
sandbox is on). Every record is read once: the watch keeps the last number it read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kestrel.protocol.errors import StoreError
from kestrel.protocol.events import ModelCompleted, ModelRequestStarted, Record, ToolFinished

logger = logging.getLogger(__name__)

EVERY_S = 1.0
"""How often the log is read while the run goes on."""
COMMAND_TOOLS = frozenset({"bash"})
"""The tools whose calls each start a command (in a sandbox of its own when it is on)."""


class StepWatch:
    """Reads a session's new records from `since` on, every `EVERY_S`, into `metrics`."""

    def __init__(
        self, open_store: Callable[[], Any], session_id: str, since: int, metrics: Any
    ) -> None:
        self._open_store = open_store
        self._session_id = session_id
        self._last = since
        self._metrics = metrics
        self._started: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="step-watch", daemon=True)

    def start(self) -> StepWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, after one last read of what the run logged."""
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        store = None
        try:
            store = self._open_store()
            while not self._stop.wait(EVERY_S):
                self._read(store)
            self._read(store)
        except StoreError as exc:  # Metrics only: the run goes on regardless.
            logger.warning("step metrics of session %s stopped: %s", self._session_id, exc)
        finally:
            if store is not None:
                with contextlib.suppress(StoreError):
                    store.close()

    def _read(self, store: Any) -> None:
        for record in store.read(self._session_id, self._last):
            self._last = record.seq
            self.observe(record)

    def observe(self, record: Record) -> None:
        """Count one record's step, if it ends one."""
        match record.event:
            case ModelRequestStarted(request_id=request_id):
                self._started[request_id] = record.at
            case ModelCompleted(request_id=request_id):
                began = self._started.pop(request_id, None)
                if began is not None:
                    self._metrics.step_seconds.labels(kind="model").observe(record.at - began)
            case ToolFinished(name=name, duration_ms=ms, exit_code=code, interrupted=cut):
                self._metrics.step_seconds.labels(kind="tool").observe(ms / 1000.0)
                if name in COMMAND_TOOLS and (code is not None or cut):
                    self._metrics.sandbox_starts.inc()
