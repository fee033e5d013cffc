"""A small git repository, an isolated home, and a real `kestrel acp` process, driven by the
SDK's own client playing the editor over a stdio pipe; every message the agent sends is checked
against the protocol's JSON schema."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.exceptions import RequestError
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
)
from acp.stdio import spawn_agent_process
from acp_schema import SchemaCheck

from kestrel.protocol.events import Event
from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

CALC = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"
TIMEOUT_S = 120.0
"""The longest any one exchange may take, for a slow machine."""


class Repo:
    """A committed git repository in `tmp/repo`, with HOME, caches and data kept in `tmp`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "repo"
        self.root.mkdir()
        (self.root / "calc.py").write_text(CALC)
        (self.root / "README.md").write_text("# Calc\n\nAdds numbers.\n")
        git = ["git", "-C", str(self.root)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run(
            [*git, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "start"],
            check=True,
        )
        self.stderr = tmp / "agent-stderr.txt"
        home = tmp / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
            self.env.pop(key, None)
        self.env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_CACHE_HOME=str(home / ".cache"),
            KESTREL_DATA_DIR=str(tmp / "data"),
            # Sessions run in the sandbox where bubblewrap is installed (CI always); elsewhere
            # unconfined, as `--sandbox none` would.
            KESTREL_SANDBOX="bwrap" if shutil.which("bwrap") else "none",
            PYTHONUNBUFFERED="1",
        )

    def script(self, turns: list[dict[str, Any]], name: str = "script.json") -> str:
        """Write the scripted model's turns; the `--model` value that replays them."""
        path = self.tmp / name
        path.write_text(json.dumps(turns))
        return f"scripted:{path}"

    def log(self, session_id: str) -> list[Event]:
        """The events of a session's log, as Kestrel recorded them."""
        store = SQLiteStore(self.tmp / "data" / STORE_FILE_NAME)
        try:
            return [record.event for record in store.read(session_id)]
        finally:
            store.close()

    def agent_command(self, *options: str) -> list[str]:
        """The command an editor's settings name to start Kestrel."""
        return [sys.executable, "-m", "kestrel", "acp", *options]

    @asynccontextmanager
    async def editor(self, *options: str) -> AsyncIterator[Editor]:
        """An initialized editor connection to a fresh `kestrel acp` process."""
        editor = Editor()
        command, *args = self.agent_command(*options)
        with self.stderr.open("a") as errlog:
            async with spawn_agent_process(
                lambda _agent: editor,
                command,
                *args,
                env=self.env,
                cwd=self.root,
                transport_kwargs={"stderr": errlog, "shutdown_timeout": 30.0},
                observers=[editor.schema.observe],
            ) as (connection, process):
                editor.connection = connection
                editor.process = process
                editor.initialized = await within(
                    connection.initialize(protocol_version=PROTOCOL_VERSION)
                )
                yield editor
        assert editor.schema.problems == [], editor.schema.problems


Chooser = Callable[[ToolCallUpdate, list[PermissionOption]], str | None]
"""Picks the option id the editor answers a permission request with; None cancels."""


@dataclass
class Editor:
    """The editor's side: it records every update and answers permission requests."""

    choose: Chooser = lambda _call, options: options[0].option_id
    updates: list[tuple[str, Any]] = field(default_factory=list)
    asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(default_factory=list)
    schema: SchemaCheck = field(default_factory=SchemaCheck)
    text_seen: asyncio.Event = field(default_factory=asyncio.Event)
    connection: ClientSideConnection | None = None
    process: asyncio.subprocess.Process | None = None
    initialized: Any = None

    @property
    def agent(self) -> ClientSideConnection:
        """The connection to the agent."""
        assert self.connection is not None
        return self.connection

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Record an update."""
        self.updates.append((session_id, update))
        if isinstance(update, AgentMessageChunk):
            self.text_seen.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        """Answer with what `choose` picks."""
        self.asked.append((tool_call, options))
        chosen = self.choose(tool_call, options)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def read_text_file(self, **_: Any) -> Any:
        """Kestrel reads files itself: a request for one is a failure of the test."""
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, **_: Any) -> Any:
        """Kestrel writes files itself: a request for one is a failure of the test."""
        raise RequestError.method_not_found("fs/write_text_file")

    def kinds(self) -> list[str]:
        """The kind of every update, in order."""
        return [update.session_update for _, update in self.updates]

    def of_kind(self, kind: str) -> list[Any]:
        """The updates of one kind, in order."""
        return [update for _, update in self.updates if update.session_update == kind]

    def agent_text(self) -> str:
        """Everything the agent said, joined."""
        return "".join(
            chunk.content.text
            for chunk in self.of_kind("agent_message_chunk")
            if isinstance(chunk.content, TextContentBlock)
        )

    def tool_updates(self, call_id: str) -> list[Any]:
        """The start and updates of one tool call, in order."""
        return [
            u
            for _, u in self.updates
            if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id
        ]


async def within(work: Any, timeout: float = TIMEOUT_S) -> Any:
    """Await `work`, failing the test if the agent does not answer in time."""
    return await asyncio.wait_for(work, timeout)


def text_prompt(text: str) -> list[TextContentBlock]:
    """A prompt of plain text."""
    return [TextContentBlock(type="text", text=text)]


def outgoing(event: StreamEvent) -> bool:
    """Whether the editor sent the message (else the agent did)."""
    return event.direction is StreamDirection.OUTGOING
