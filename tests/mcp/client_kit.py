"""Real MCP servers for the client's tests: the toolbox over stdio or streamable HTTP, and a
published server from the package registry; and headless `kestrel -p` runs that use them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

TOOLBOX = Path(__file__).parent / "servers" / "toolbox.py"
SANDBOX = "bwrap" if shutil.which("bwrap") else "none"


def toolbox_entry(**extra: Any) -> dict[str, Any]:
    """A `.mcp.json` entry that starts the toolbox on stdio."""
    return {"command": sys.executable, "args": [str(TOOLBOX), "stdio"], **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpToolbox:
    """The toolbox over streamable HTTP on loopback, wanting `Authorization: Bearer TOKEN`."""

    def __init__(self, token: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        command = [sys.executable, str(TOOLBOX), "http", str(self.port), token]
        self.process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the HTTP toolbox did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class Project:
    """A git repository, a home with the user's settings, and headless runs of Kestrel in it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "project"
        self.root.mkdir()
        (self.root / "app.py").write_text("print('hello')\n")
        git = ["git", "-C", str(self.root)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        commit = [*git, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "start"]
        subprocess.run(commit, check=True)
        self.home = tmp / "home"
        self.config = self.home / ".config" / "kestrel"
        self.config.mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        self.env |= {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "KESTREL_DATA_DIR": str(tmp / "data"),
            "KESTREL_SANDBOX": SANDBOX,
        }

    def user_servers(self, servers: dict[str, Any]) -> None:
        (self.config / "mcp.json").write_text(json.dumps({"mcpServers": servers}))

    def kestrel(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kestrel", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check:
            assert done.returncode == 0, done.stderr + done.stdout
        return done

    def run(self, calls: list[tuple[str, dict[str, Any]]], *flags: str) -> list[dict[str, Any]]:
        """A headless session whose scripted model makes `calls` one per turn; its events."""
        turns: list[dict[str, Any]] = [
            {"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments in calls
        ]
        script = self.tmp / "script.json"
        script.write_text(json.dumps([*turns, {"text": "done"}]))
        done = self.kestrel(
            "-p",
            "use the tools",
            "--model",
            f"scripted:{script}",
            "--output-format",
            "stream-json",
            *flags,
        )
        records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return [r["event"] for r in records]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]
