"""How a hosted session's run is started as a process of its own: its command line and the
environment it sees. The server's worker pool and the cluster's workers start runs alike."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from kestrel.protocol.events import UserMessage
from kestrel.store.base import EventStore

ENV_PASSED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "PYTHONPATH",
    "KESTREL_SANDBOX",
    # The model providers' keys: the session's process calls the model with them; the sandbox
    # keeps them from every command it runs.
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    # Cluster mode's Redis: the session publishes its events there and shares the reply cache.
    "KESTREL_REDIS_URL",
    "KESTREL_REDIS_PREFIX",
    "KESTREL_RESPONSE_CACHE_TTL_S",
    # Cluster mode's shared storage for checkpoints, and its credentials.
    "KESTREL_WORKSPACE_SHARE_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
)
"""The server's environment variables a session's process sees; nothing else."""


def run_argv(session_id: str, message: str | None) -> list[str]:
    """`kestrel resume ID [MESSAGE] -p --wait-for-approvals`, headless, JSON result."""
    argv = [sys.executable, "-m", "kestrel", "resume", "-p", "--output-format", "json"]
    # After `--` the id and the message are only arguments: a message that looks like an
    # option ("--model=...") cannot change how the session runs.
    return [*argv, "--wait-for-approvals", "--", session_id, *([message] if message else [])]


def run_env(data_dir: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of a run: the variables in `ENV_PASSED`, a home of the server's own, the
    data directory, and the instruction to die with its parent."""
    home = data_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ENV_PASSED}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        KESTREL_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
        # Killed when its parent dies, even by SIGKILL, so no session runs unseen. Its log
        # resumes it on the next start exactly as after a crash: a question it waited on is
        # asked again (an answer given meanwhile counts), a cut command is rolled back.
        KESTREL_DIE_WITH_PARENT=str(os.getpid()),
    )
    env.update(extra)
    return env


def message_to_send(
    store: EventStore, session_id: str, message: str | None, since: int | None
) -> str | None:
    """The message a run sends: none when an earlier try of the same run, cut short, already
    logged it after seq `since`."""
    if message is None or since is None:
        return message
    for record in store.read(session_id, since):
        if isinstance(record.event, UserMessage) and record.event.text == message:
            return None
    return message
