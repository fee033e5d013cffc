"""The hosted server delivering pull requests: its forge a local GitHub fake, its repositories
served by `git http-backend` on loopback (clones without a token, pushes with it), and the
forge's token in the server's settings only. The server runs in this process, served by uvicorn
on a thread, because its settings (plain http git URLs, the forge) are made here; its sessions
still run in processes of their own, as under `kestrel serve`."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from kestrel.delivery.forges import ForgeSettings
from kestrel.server.app import create_app
from kestrel.server.hosting import ServerConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "delivery"))

from forge_fake import FakeGitHub
from git_server import GitHttpServer
from server_kit import Server

TOKEN = "ghp_" + "h0st3dF0rgeT0ken" * 2
CALC = "def add(a, b):\n    return a - b\n\n\ndef half(x):\n    return x / 2\n"
REPOSITORY = "acme/shop"


def edit(path: str, old: str, new: str, text: str = "") -> dict[str, Any]:
    """A scripted turn that edits a file."""
    call = {"name": "edit_file", "arguments": {"path": path, "old_str": old, "new_str": new}}
    return {"text": text, "tool_calls": [call]}


class LiveServer(Server):
    """`Server`'s tokens, clients and scripts, with the app served in this process."""

    def __init__(self, tmp: Path, forge: ForgeSettings) -> None:
        super().__init__(tmp)
        self.forge = forge
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve the app on a free loopback port until `stop`."""
        config = ServerConfig(
            data_dir=self.data,
            workers=2,
            scripted_models_dir=self.scripts,
            allowed_git_hosts=("127.0.0.1",),
            allow_http_git=True,
            min_free_bytes=1024 * 1024,
            forge=self.forge,
        )
        listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        served = uvicorn.Config(create_app(config), log_level="warning", access_log=False)
        self._uvicorn = uvicorn.Server(served)
        self._thread = threading.Thread(target=self._uvicorn.run, args=([listener],), daemon=True)
        self._thread.start()
        until(lambda: self._answers(), "the server answering /healthz", timeout=30)

    def _answers(self) -> bool:
        try:
            return httpx.get(self.url + "/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        """Shut the app down (its sessions stopped) and wait for it."""
        if self._uvicorn is not None and self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(timeout=90)
            self._uvicorn = None


class Delivering:
    """The git server, the fake forge and the server, started together and stopped together."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.git = GitHttpServer(tmp / "remote", token=TOKEN, public_reads=True)
        self.git.start()
        self.forge = FakeGitHub(token=TOKEN, git_root=self.git.root)
        self.forge.start()
        (tmp / "serve").mkdir()
        forge = ForgeSettings(api_url=self.forge.api_url, token=TOKEN, sync_every_s=1.0)
        self.server = LiveServer(tmp / "serve", forge)
        self._source = self._repository(tmp / "source")
        self.logged = _Kept()
        self._level = logging.getLogger().level
        logging.getLogger().addHandler(self.logged)
        logging.getLogger().setLevel(logging.DEBUG)
        self.server.start()

    def _repository(self, root: Path) -> Path:
        root.mkdir()
        (root / "calc.py").write_text(CALC)
        ident = ["-c", "user.name=t", "-c", "user.email=t@x"]
        for args in (["init", "-q", "-b", "main"], ["add", "."], [*ident, "commit", "-qm", "go"]):
            subprocess.run(["git", "-C", str(root), *args], check=True)
        self.git.create_repository(REPOSITORY, root)
        return root

    @property
    def url(self) -> str:
        """The clone URL sessions start from."""
        return self.git.url_for(REPOSITORY)

    def stop(self) -> None:
        """Stop the server, the forge and the git server."""
        self.server.stop()
        logging.getLogger().removeHandler(self.logged)
        logging.getLogger().setLevel(self._level)
        self.forge.stop()
        self.git.stop()

    def start_session(
        self, client: httpx.Client, task: str, turns: list[dict[str, Any]], name: str
    ) -> str:
        """A session on the repository, run until it stops (its questions answered yes)."""
        body = {
            "task": task,
            "source": {"git_url": self.url},
            "model": self.server.script(turns, name),
            "permission_mode": "accept-edits",
        }
        created = client.post("/sessions", json=body)
        assert created.status_code == 201, created.text
        session_id = str(created.json()["id"])
        settle(client, session_id)
        return session_id

    def secrets_seen(self, clients: list[httpx.Client]) -> list[str]:
        """Stop everything, then look for the token where it must never be: each session's
        events, every file the server wrote (logs, stores, checkouts and their git config) and
        every line the process logged; the start of each place it is in."""
        places: list[str] = []
        for client in clients:
            for shown in client.get("/sessions").json():
                places.append(client.get(f"/sessions/{shown['id']}/events").text)
        self.stop()
        for path in self.server.data.rglob("*"):
            if path.is_file():
                places.append(path.read_bytes().decode("latin-1"))
        places.append("\n".join(self.logged.lines))
        return [place[:200] for place in places if TOKEN in place]


def settle(client: httpx.Client, session_id: str, timeout: float = 180) -> dict[str, Any]:
    """Answer every question with yes until the session is idle and finished; its view."""
    deadline = time.monotonic() + timeout
    shown: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for question in client.get(f"/sessions/{session_id}/approvals").json():
            client.post(
                f"/sessions/{session_id}/approvals/{question['call_id']}", json={"allow": True}
            )
        shown = client.get(f"/sessions/{session_id}").json()
        if shown["status"] == "idle" and shown.get("finished"):
            return shown
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} never stopped: {shown}")


def until(check: Callable[[], Any], what: str, timeout: float = 180) -> Any:
    """Poll `check` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


class _Kept(logging.Handler):
    """Every log record of the process, formatted, from warnings down to debug."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
