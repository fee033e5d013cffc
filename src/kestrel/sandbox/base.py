"""The interface every command executor implements (the `bash` tool runs through it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

OutputSink = Callable[[Literal["stdout", "stderr"], str], None]
"""Called with each piece of output as the command produces it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecResult:
    """How a command ended and everything it printed (stdout and stderr interleaved)."""

    exit_code: int
    output: str
    timed_out: bool = False
    duration_ms: float = 0.0
    stopped_by: str | None = None
    """The limit the command broke (a workspace quota), which stopped it if it still ran."""
    ended_background: str = ""
    """One line naming the background processes ended when the command ended; empty if none."""


class Executor(Protocol):
    """Runs one shell command string in a working directory."""

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        on_output: OutputSink | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run `command` with `bash -c`; on timeout or cancellation kill its whole process group."""
        ...
