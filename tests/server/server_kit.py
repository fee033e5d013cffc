"""A real `kestrel serve` on loopback for the API tests, with tenants, tokens and a repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

KESTREL = [sys.executable, "-m", "kestrel"]
BASH_THEN_DONE = [
    {
        "text": "Creating the file.",
        "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > made.txt"}}],
    },
    {"text": "All done."},
]


class Server:
    """A server process, its data folder, and what tests need to talk to it."""

    def __init__(self, tmp: Path, workers: int = 2, plans: str = "") -> None:
        self.tmp = tmp
        self.workers = workers
        self.plans = tmp / "plans.toml"
        self.plans.write_text(plans)
        self.data = tmp / "data"
        self.scripts = tmp / "scripts"
        self.repos = tmp / "repos"
        for folder in (self.scripts, self.repos):
            folder.mkdir()
        home = tmp / "home"
        home.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(home),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }
        self.extra_args: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> None:
        """Start `kestrel serve` and wait until it listens."""
        argv = [*KESTREL, "serve", "--port", "0", "--data-dir", str(self.data)]
        argv += ["--workers", str(self.workers), "--plans", str(self.plans)]
        argv += ["--allowed-root", str(self.repos), "--allow-scripted-models", str(self.scripts)]
        argv += ["--min-free-mb", "1", *self.extra_args]
        self.proc = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "listening on" in line, line + (self.proc.stderr.read() if self.proc.stderr else "")
        self.url = line.split("listening on ", 1)[1].strip()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("the server never answered /healthz")

    def stop(self) -> None:
        """SIGTERM the server and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=60)

    def token(self, tenant: str, plan: str = "pro", *, admin: bool = False) -> str:
        """A new tenant with one user's API token (an admin's with `admin`)."""
        argv = [*KESTREL, "serve", "tokens", "create", "--tenant", tenant, "--plan", plan]
        argv += ["--admin"] if admin else []
        done = subprocess.run(
            [*argv, "--data-dir", str(self.data)],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip().splitlines()[-1]

    def client(self, token: str) -> httpx.Client:
        """An HTTP client that sends `token`."""
        return httpx.Client(
            base_url=self.url + "/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def repo(self, name: str = "project") -> Path:
        """A small git repository under the allowed root."""
        root = self.repos / name
        root.mkdir()
        (root / "README.md").write_text("hello\n")
        for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=root, check=True
            )
        return root

    def script(self, turns: list[dict[str, object]], name: str = "script.json") -> str:
        """A scripted model the server may use."""
        path = self.scripts / name
        path.write_text(json.dumps(turns))
        return f"scripted:{path}"


def wait_for(client: httpx.Client, session_id: str, check: object, timeout: float = 120) -> dict:
    """Poll the session until `check(view)` is true; return the view."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = client.get(f"/sessions/{session_id}").json()
        if check(shown):  # type: ignore[operator]
            return dict(shown)
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} never got there: {shown}")
