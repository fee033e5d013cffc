"""Watching a repository for changes during a long session, so queries never wait on a scan."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)

MAX_PENDING = 5000
"""Past this many changed paths (a checkout, a rebase) the watcher asks for a full rescan."""


class ChangeWatcher:
    """Collects changed paths in a background thread; `drain` hands them over."""

    def __init__(self, root: Path, *, debounce_ms: int = 100) -> None:
        self.root = root.resolve()
        self._debounce_ms = debounce_ms
        self._pending: set[str] = set()
        self._overflow = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed: str | None = None

    def start(self) -> bool:
        """Start watching; False (with `failed` saying why) when the platform cannot."""
        try:
            import watchfiles  # noqa: F401  (checked here so a missing wheel fails loudly, early)
        except ImportError as exc:
            self.failed = f"watchfiles is not installed: {exc}"
            return False
        self._thread = threading.Thread(target=self._run, name="kestrel-watch", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=5)
        return self.failed is None

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def drain(self) -> set[str] | None:
        """Changed repository paths since the last call; None means rescan everything."""
        with self._lock:
            pending, overflow = self._pending, self._overflow
            self._pending, self._overflow = set(), False
        return None if overflow else pending

    def _run(self) -> None:
        import watchfiles

        try:
            changes = watchfiles.watch(
                self.root,
                stop_event=self._stop,
                debounce=self._debounce_ms,
                step=20,
                yield_on_timeout=True,
                rust_timeout=200,
                raise_interrupt=False,
            )
            self._ready.set()
            for batch in changes:
                self._record(path for _, path in batch)
        except Exception as exc:  # the watcher is an optimisation: fall back to stat checks
            self.failed = f"{type(exc).__name__}: {exc}"
            logger.warning("file watcher stopped: %s", self.failed)
            with self._lock:
                self._overflow = True
        finally:
            self._ready.set()

    def _record(self, paths: Iterable[str]) -> None:
        with self._lock:
            for raw in paths:
                try:
                    rel = Path(raw).resolve().relative_to(self.root)
                except ValueError:
                    continue
                self._pending.add(rel.as_posix())
            if len(self._pending) > MAX_PENDING:
                self._overflow = True
                self._pending.clear()
