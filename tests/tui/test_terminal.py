"""The view in a real terminal: tmux runs `kestrel`, a task is typed, the screen is read."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

ANSWER = "Hello from the scripted model."


class Tmux:
    """A tmux server of its own (its own socket), with one window."""

    def __init__(self) -> None:
        self.socket = f"kestrel-tui-{uuid.uuid4().hex[:12]}"

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> str:
        """What the window shows now."""
        return self("capture-pane", "-p", "-t", "main")

    def wait_for(self, text: str, timeout: float = 120) -> str:
        """Poll the screen until `text` is on it; a generous limit, never a timing."""
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.25)
        raise AssertionError(f"never saw {text!r}; the screen shows:\n{shown}")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    yield server
    server("kill-server")


def test_a_task_typed_in_the_view_streams_its_answer(tmp_path: Path, tmux: Tmux) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": ANSWER}]))
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
        "PATH": os.environ.get("PATH", ""),
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (
        f"cd {shlex.quote(str(project))} && env -i {exports} "
        f"{shlex.quote(sys.executable)} -m kestrel --model scripted:{shlex.quote(str(script))}"
    )
    tmux("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", command)
    tmux.wait_for("○ idle")  # The view is up, with its status line.
    tmux("send-keys", "-t", "main", "-l", "say hello")
    tmux("send-keys", "-t", "main", "Enter")
    shown = tmux.wait_for(ANSWER)
    shown = tmux.wait_for("── done")
    assert "> say hello" in shown
    assert "scripted:script.json" in shown and "sandbox" in shown
    tmux("send-keys", "-t", "main", "C-q")
    deadline = time.monotonic() + 60
    while "main" in tmux("list-sessions", "-F", "#{session_name}") and time.monotonic() < deadline:
        time.sleep(0.25)
    assert "main" not in tmux("list-sessions", "-F", "#{session_name}")
