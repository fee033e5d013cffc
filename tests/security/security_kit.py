"""Projects with a real git repository and a scripted model, for the security gate's tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

KESTREL = [sys.executable, "-m", "kestrel"]
AWS_KEY = "AKIAZ3MNQ7T4XKD2LW5P"
PRIVATE_KEY_BODY = (
    "MIIEpAIBAAKCAQEA7bq98s0ZLpQkmT4YtWJ8yqUeFzXW1Z9Nx2lK3vH6u8QJc5sPdRzY\n"
    "h2Lq0W3nV8yTg5KpR7sXmA4cE1uJ9oB6fZ2dN0aQ3lM8vC5xW7tY1eH4rS9gK2jP6iU"
)
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n-----END RSA PRIVATE KEY-----"
APP = (
    '"""The application\'s settings and helpers."""\n\n'
    "import os\n\n\n"
    "def region() -> str:\n"
    '    return os.environ.get("APP_REGION", "eu-west-1")\n'
)


def write(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Write `files` (path -> text or bytes) under `root`."""
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def git(root: Path, *args: str) -> str:
    """Run git in `root` with a fixed identity; its output."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def repository(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """A git repository at `root` with `files` committed."""
    write(root, files)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def write_call(path: str, content: str) -> dict[str, object]:
    """A scripted turn that writes a whole file."""
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def bash_call(command: str) -> dict[str, object]:
    """A scripted turn that runs a command."""
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


class Project:
    """A repository, a model script, and a home and data directory of their own."""

    def __init__(self, tmp: Path, files: Mapping[str, str | bytes]) -> None:
        self.root = repository(tmp / "project", files)
        self.script = tmp / "script.json"
        self.data = tmp / "data"
        home = tmp / "home"
        (home / ".config" / "kestrel").mkdir(parents=True)
        self.settings = home / ".config" / "kestrel" / "settings.toml"
        self.vars = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "KESTREL_DATA_DIR": str(self.data),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run kestrel in the project to the end."""
        return subprocess.run(
            [*KESTREL, *args],
            env=self.vars,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def session(
        self, turns: Sequence[Mapping[str, object]], *extra: str, mode: str = "accept-edits"
    ) -> subprocess.CompletedProcess[str]:
        """A headless scripted session; its events are on standard output."""
        self.script.write_text(json.dumps(list(turns)))
        return self.run(
            *("-p", "make the change", "--model", f"scripted:{self.script}"),
            *("--permission-mode", mode, "--output-format", "stream-json", *extra),
        )


def events(output: str) -> list[dict[str, object]]:
    """The events of a `stream-json` output."""
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    return [record["event"] for record in records if "event" in record]


def session_id(output: str) -> str:
    """The session id of a `stream-json` output."""
    for line in output.splitlines():
        if line.strip():
            record = json.loads(line)
            if "session_id" in record:
                return str(record["session_id"])
    raise AssertionError(f"no session id in {output[:500]!r}")


def of_type(found: Sequence[dict[str, object]], kind: str) -> list[dict[str, object]]:
    """The events of one type."""
    return [event for event in found if event["type"] == kind]
