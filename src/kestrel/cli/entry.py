"""The `kestrel` console script: moves into the private namespace first, then runs the command.

A process can enter a new user namespace only while it has a single thread, and importing the
rest of Kestrel starts some (numpy's thread pool). So the commands that may work on an overlay
take that step here, before those imports; `--workspace direct` (or the setting) skips it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

OVERLAY_COMMANDS = frozenset({"resume", "rewind", "apply", "discard", "demo"})
"""Subcommands that open a session's overlay; a task (no subcommand) does too."""
_OTHER_COMMANDS = frozenset(
    {
        "checkpoints",
        "diff",
        "sessions",
        "doctor",
        "sandbox",
        "index",
        "search",
        "map",
        "eval",
        "trust",
    }
)
"""Subcommands that never open an overlay here. `eval` starts each task's session as a process of
its own, which takes this step itself if it needs to; the evaluation itself runs threads and only
works on folders it owns."""


def wants_overlay(args: list[str], env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether this command line may open an overlay (a guess from the arguments alone)."""
    if (args and args[0] in _OTHER_COMMANDS) or {"--help", "-h", "--version"} & set(args):
        return False
    if _flag(args, "--workspace") == "direct" or env.get("KESTREL_WORKSPACE") == "direct":
        return False
    return _settings_want_overlay(args, env)


def _flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _settings_want_overlay(args: list[str], env: dict[str, str] | os._Environ[str]) -> bool:
    from kestrel.protocol.errors import ConfigError
    from kestrel.settings_load import load_settings

    cwd = Path(_flag(args, "--cwd") or os.getcwd())
    try:
        settings = load_settings(cwd, env=env, flags={}, home=Path.home())
    except (ConfigError, OSError):
        return True  # The command itself reports the bad settings.
    return settings.workspace == "overlay"


def main() -> None:
    """Entry point of the `kestrel` console script."""
    if wants_overlay(sys.argv[1:], os.environ):
        from kestrel.workspace.overlay import prepare_namespace

        prepare_namespace()  # Where refused, sessions work on a copy instead.
    from kestrel.cli.main import main as run

    run()
