"""What a tool is, what it gets to work with, and what it gives back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import BaseModel

from kestrel.protocol.events import Event, ToolKind
from kestrel.sandbox.base import Executor, OutputSink

__all__ = ["PlannedWrite", "Tool", "ToolContext", "ToolFailed", "ToolKind", "ToolOutcome"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedWrite:
    """A file write a tool is about to make, announced before it lands.

    `after_hash` of `None` means the file is deleted; `before_hash` of `None` means it is new.
    """

    path: str
    before_hash: str | None
    after_hash: str | None
    diff: str
    after: bytes | None = field(default=None, repr=False, compare=False)
    """The new content, kept until the write lands, so a resume can finish a cut-short edit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Everything a tool may touch, passed in by the loop."""

    root: Path
    """The workspace: relative paths resolve here, and no tool reads or writes outside it."""
    executor: Executor
    artifacts_dir: Path
    """Where full outputs too large for the model's context are kept for paging."""
    on_output: OutputSink
    """Streams output of long-running tools to the session's events."""
    before_write: Callable[[PlannedWrite], Awaitable[None]]
    """Awaited before each file write lands, so the intent is durable before the effect."""
    bash_timeout_s: float = 120.0
    max_output_chars: int = 30_000
    read_hashes: dict[str, str] = field(default_factory=dict)
    """SHA-256 of each file as the model last saw it (read or written), by shown path.

    Edit tools refuse a file whose bytes changed since then. The dict is shared by every
    context the loop makes for one session, so it outlives a single call.
    """
    call_id: str = ""
    """The id of the call being run, for events the tool reports about it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """A tool's result; `content` is exactly what the model sees."""

    content: str
    is_error: bool = False
    exit_code: int | None = None
    truncated: bool = False
    full_output_path: str | None = None
    events: tuple[Event, ...] = ()
    """What the call changed in the session (e.g. its task list), logged before its result."""


class ToolFailed(Exception):
    """A tool call failed in a way the model can recover from; the message is shown to it."""


class Tool(Protocol):
    """One tool the model can call. Its name and arguments are a public contract."""

    name: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[ToolKind]
    Args: ClassVar[type[BaseModel]]

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Run with validated arguments; raise `ToolFailed` for errors the model should see."""
        ...
