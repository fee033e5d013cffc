"""A hook for tests and benchmarks that stops an edit between its writes, the way a crash would.

`KESTREL_TEST_EDIT_HOOK=kill:N` makes an edit SIGKILL its own process just before its write
number N (counted from 0) lands, after every write was announced: `kill:1` leaves a
multi-file `apply_patch` with its first file written and the rest not. `hold:N@PATH` creates
PATH there instead and waits while PATH exists (at most a minute), so a test can look at, or
kill, the process at that exact point. Unset, it does nothing.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

EDIT_HOOK = "KESTREL_TEST_EDIT_HOOK"


def before_landing(index: int) -> None:
    """Called just before an edit's write number `index` lands."""
    action, _, rest = os.environ.get(EDIT_HOOK, "").partition(":")
    if not action:
        return
    where, _, path = rest.partition("@")
    if where != str(index):
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "hold" and path:
        Path(path).touch()
        deadline = time.monotonic() + 60
        while Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
