"""A project, a scripted model and the real view, for driving the view with Textual's pilot."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Collapsible, Markdown, Static

from kestrel.app import open_store
from kestrel.service.sessions import settings_for
from kestrel.store.base import EventStore
from kestrel.tui.app import KestrelApp, ViewOptions
from kestrel.tui.driver import StartOptions
from kestrel.tui.transcript import Transcript

SIZE = (110, 36)
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0021}
"""Every scripted turn reports this usage, so the status line reads the same on every run."""
BUGGY = "def add(a, b):\n    return a - b\n"


def turn(text: str = "", *calls: tuple[str, dict[str, object]]) -> dict[str, object]:
    """One scripted reply: text, then tool calls, with fixed usage."""
    reply: dict[str, object] = {"text": text, "usage": USAGE}
    if calls:
        reply["tool_calls"] = [{"name": name, "arguments": args} for name, args in calls]
    return reply


class Project:
    """A git repository with one buggy file, a script file, and a private data folder."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "project"
        self.root.mkdir()
        (self.root / "calc.py").write_text(BUGGY)
        git = ["git", "-C", str(self.root), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
        self.script = tmp / "script.json"
        self.stores: list[EventStore] = []

    def write_script(self, turns: list[dict[str, object]]) -> None:
        """The scripted model's replies, in order."""
        self.script.write_text(json.dumps(turns))

    def view(
        self,
        task: str | None = None,
        *,
        workspace: str = "direct",
        mode: str | None = None,
        plan: bool = False,
        resume: str | None = None,
        allow: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
    ) -> KestrelApp:
        """The real view on a real store, with the scripted model."""
        flags = {
            "model": f"scripted:{self.script}",
            "workspace": workspace,
            "allow": list(allow),
            "deny": list(deny),
            "permission_mode": mode,
        }
        settings = settings_for(self.root, flags)
        store = open_store(settings)
        self.stores.append(store)
        start = StartOptions(plan_first=plan, permission_mode=mode)  # type: ignore[arg-type]
        options = ViewOptions(task=task, resume=resume, start=start, timings=False)
        return KestrelApp(store, settings, self.root, options)

    def close(self) -> None:
        """Close every store the views opened."""
        for store in self.stores:
            store.close()


def isolate(monkeypatch: object, tmp: Path) -> None:
    """Point home, settings and data at the temporary folder; no sandbox unless bwrap runs."""
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    import os

    for name in list(os.environ):
        if name.startswith("KESTREL_"):
            monkeypatch.delenv(name)
    home = tmp / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("KESTREL_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("KESTREL_SANDBOX", "bwrap" if shutil.which("bwrap") else "none")
    monkeypatch.delenv("NO_COLOR", raising=False)


def conversation(view: KestrelApp) -> str:
    """The conversation's text: messages, replies, tool titles and notices, in order."""
    parts: list[str] = []
    shown = view.query(Transcript)  # None while one session's view makes way for another's.
    for widget in shown.first().query("*") if shown else ():
        if isinstance(widget, Markdown):
            parts.append(widget.source)
        elif isinstance(widget, Collapsible):
            parts.append(widget.title)
        elif isinstance(widget, Static) and not _inside_title_or_markdown(widget):
            parts.append(str(widget.content))
    return "\n".join(parts)


async def send(pilot: Pilot[int], text: str) -> None:
    """Type `text` into the prompt and press Enter."""
    view = pilot.app
    assert isinstance(view, KestrelApp)
    view.prompt_input.focus()
    view.prompt_input.load_text(text)
    await pilot.press("enter")


def shows(view: KestrelApp, screen: type[Screen[Any]], ready: str) -> bool:
    """Whether the view shows a dialog of this kind, composed as far as `ready`."""
    return isinstance(view.screen, screen) and bool(view.screen.query(ready))


def _inside_title_or_markdown(widget: Static) -> bool:
    name = type(widget).__name__
    return name == "CollapsibleTitle" or any(isinstance(a, Markdown) for a in widget.ancestors)


async def until(pilot: Pilot[int], check: Callable[[], bool], what: str, limit: int = 1200) -> None:
    """Let the view run until `check()` holds (checked every 50 ms, at most `limit` times)."""
    for _ in range(limit):
        if check():
            return
        await pilot.pause(0.05)
    view = pilot.app
    shown = conversation(view) if isinstance(view, KestrelApp) else ""
    raise AssertionError(f"never happened: {what}; the view shows:\n{shown}")
