"""Hooks for tests and benchmarks that stop a tool call at a chosen point, the way a crash would.

`KESTREL_TEST_EDIT_HOOK=kill:N` makes an edit SIGKILL its own process just before its write
number N (counted from 0) lands, after every write was announced: `kill:1` leaves a
multi-file `apply_patch` with its first file written and the rest not. `hold:N@PATH` creates
PATH there instead and waits while PATH exists (at most a minute), so a test can look at, or
kill, the process at that exact point. `KESTREL_TEST_TOOL_HOOK=kill:NAME` (or `hold:NAME@PATH`)
does the same for every call of the tool NAME, right after its `tool_started` is logged, before
it runs. Unset, they do nothing.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

EDIT_HOOK = "KESTREL_TEST_EDIT_HOOK"
TOOL_HOOK = "KESTREL_TEST_TOOL_HOOK"


def before_landing(index: int) -> None:
    """Called just before an edit's write number `index` lands."""
    _stop_at(EDIT_HOOK, str(index))


def before_running(name: str) -> None:
    """Called when a call of the tool `name` has started, before it runs."""
    _stop_at(TOOL_HOOK, name)


def _stop_at(variable: str, point: str) -> None:
    action, _, rest = os.environ.get(variable, "").partition(":")
    if not action:
        return
    where, _, path = rest.partition("@")
    if where != point:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "hold" and path:
        Path(path).touch()
        deadline = time.monotonic() + 60
        while Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
