"""Whether `kestrel` opens the full-screen view, and opening it for a run request.

The view opens for an interactive run in a terminal that can show it: standard input and output
are terminals, `TERM` is not `dumb`, and the terminal reports a size. `-p`, `--plain`, pipes and
dumb terminals keep the line mode.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.cli.session_runner import RunRequest, request_flags
from kestrel.protocol.errors import ConfigError, SessionNotFound


def wants_tui(
    *,
    headless: bool,
    plain: bool,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> bool:
    """Whether this run should open the full-screen view."""
    if headless or plain:
        return False
    env = os.environ if env is None else env
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if env.get("TERM", "") in ("", "dumb"):
        return False
    try:
        if not (stdin.isatty() and stdout.isatty()):
            return False
        size = os.get_terminal_size(stdout.fileno())
    except (OSError, ValueError):
        return False
    return size.columns > 0 and size.lines > 0


def launch_tui(request: RunRequest) -> int:
    """Open the view for the run `request` describes; the exit code."""
    from kestrel.tui.driver import StartOptions
    from kestrel.tui.launch import TuiRequest, run_tui

    start = StartOptions(
        plan_first=request.plan,
        permission_mode=request.permission_mode,
        max_turns=request.max_turns,
        max_cost=request.max_cost,
    )
    tui = TuiRequest(
        task=request.task,
        cwd=request.cwd or Path.cwd(),
        flags=request_flags(request),
        start=start,
        continue_latest=request.continue_latest,
    )
    try:
        return run_tui(tui)
    except (ConfigError, SessionNotFound) as exc:
        report_error(exc)
        return EXIT_USAGE
