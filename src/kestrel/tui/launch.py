"""Open the full-screen view for a run the command line asked for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kestrel import app, app_workspace
from kestrel.service import sessions
from kestrel.tui.app import KestrelApp, ViewOptions
from kestrel.tui.driver import StartOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class TuiRequest:
    """What the command line said: the task, where, the settings flags, how to start."""

    task: str | None
    cwd: Path
    flags: Mapping[str, object] = field(default_factory=dict)
    start: StartOptions = field(default_factory=StartOptions)
    continue_latest: bool = False


def run_tui(request: TuiRequest) -> int:
    """Run the view until the person leaves; the exit code."""
    cwd = request.cwd.resolve()
    settings = sessions.settings_for(cwd, request.flags)
    app_workspace.prepare(settings)  # Before the view starts any thread.
    store = app.open_store(settings)
    try:
        resume = sessions.latest_in(store, cwd) if request.continue_latest else None
        options = ViewOptions(task=request.task, resume=resume, start=request.start)
        code = KestrelApp(store, settings, cwd, options).run()
        return code or 0
    finally:
        store.close()
