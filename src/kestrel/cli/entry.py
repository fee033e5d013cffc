"""The `kestrel` console script: moves into the private namespace first, then runs the command.

A process can enter a new user namespace only while it has a single thread, and importing the
rest of Kestrel starts some (numpy's thread pool). So the commands that may work on an overlay
take that step here, before those imports; `--workspace direct` (or the setting) skips it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import NoReturn

OVERLAY_COMMANDS = frozenset({"resume", "rewind", "apply", "discard", "demo"})
"""Subcommands that open a session's overlay; a task (no subcommand) does too."""
_OTHER_COMMANDS = frozenset(
    {
        "approve",
        "cancel",
        "serve",
        "mcp",
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
    """Entry point of the `kestrel` console script: Ctrl-C or SIGTERM at any moment, imports
    included, ends it with one line and exit code 130 (Ctrl-C) or 143 (SIGTERM)."""
    try:
        _run()
    except KeyboardInterrupt as exc:
        _stopped(exc)
    except SystemExit as exc:
        if exc.code not in (130, 143):
            raise
        _stopped(None)  # Stopped by a signal; the command may have said so already.
    except Exception as exc:
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        _stopped(interrupt)  # Python 3.11 wraps one raised while a class is made.


def _run() -> None:
    from kestrel.cli.interrupts import watch_terminate

    _die_with_parent(os.environ.pop(DIE_WITH_PARENT, ""))  # Not passed on to its children.
    watch_terminate()
    if wants_overlay(sys.argv[1:], os.environ):
        from kestrel.workspace.overlay import prepare_namespace

        prepare_namespace()  # Where refused, sessions work on a copy instead.
    from kestrel.cli.main import main as run

    run()


DIE_WITH_PARENT = "KESTREL_DIE_WITH_PARENT"
"""Set to its process id by a parent (a server's worker) that wants this process killed when
it dies, even by SIGKILL; asked for here rather than between fork and exec, where a parent with
threads could deadlock."""


def _die_with_parent(parent: str) -> None:
    if not parent.isdigit():
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        os._exit(137)  # The parent died before the request took hold.


def _stopped(interrupt: KeyboardInterrupt | None) -> NoReturn:
    """Say "Cancelled." once (unless the command said how it stopped) and exit with the code of
    the signal that stopped it.

    The exit is `os._exit`, after flushing: every `finally` has run by now, and a Ctrl-C that
    landed in code Python compiles at run time (dataclasses do) would otherwise make the
    interpreter kill itself with SIGINT on the way out, whatever exit code was asked for.
    """
    try:
        from kestrel.cli import interrupts

        if interrupt is not None:
            interrupts.note_interrupt(interrupt)
        if not interrupts.said():
            print(interrupts.stopped_line(None), file=sys.stderr)
        code = interrupts.exit_code()
    except KeyboardInterrupt:  # Interrupted again while importing the module above.
        print("Cancelled.", file=sys.stderr)
        code = 130
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C an exception was raised for, if one was."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
