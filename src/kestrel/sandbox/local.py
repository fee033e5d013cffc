"""Runs commands directly on this machine, each in a process group of its own."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from kestrel.sandbox.base import ExecResult, OutputSink
from kestrel.sandbox.process import ProcessRunner

DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "TMPDIR",
    "SHELL",
    "VIRTUAL_ENV",
)
"""The only parent variables a command sees: API keys and tokens must never reach it."""

DEFAULT_ENV: Mapping[str, str] = {"PYTHONDONTWRITEBYTECODE": "1"}
"""Set for every command. Python writes no bytecode caches: they would litter the workspace, and
a cache written in the same second as an edit of the same size hides the edit from the next run."""


class LocalExecutor:
    """An `Executor` that runs `bash -c` here, with a scrubbed environment and no stdin."""

    def __init__(
        self,
        env_allowlist: Sequence[str] | None = None,
        *,
        kill_grace_s: float = 2.0,
        drain_grace_s: float = 0.5,
    ) -> None:
        self._allowlist = tuple(DEFAULT_ENV_ALLOWLIST if env_allowlist is None else env_allowlist)
        self._runner = ProcessRunner(kill_grace_s=kill_grace_s, drain_grace_s=drain_grace_s)

    def environment(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command gets: allow-listed parent variables, then `overrides`."""
        return scrubbed_environment(self._allowlist, overrides)

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
        return await self._runner.run(
            [shutil.which("bash") or "bash", "-c", command],
            cwd=cwd,
            env=self.environment(env),
            timeout_s=timeout_s,
            on_output=on_output,
        )


def scrubbed_environment(
    allowlist: Sequence[str], overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Allow-listed variables of this process, then `DEFAULT_ENV`, then `overrides`."""
    env = {name: os.environ[name] for name in allowlist if name in os.environ}
    env.update(DEFAULT_ENV)
    env.update(overrides or {})
    return env
