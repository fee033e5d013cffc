"""Sandboxes left stuck by a Kestrel that was killed while bubblewrap was starting.

bubblewrap sets its child's parent-death signal only after the child starts; a parent killed in
between leaves the child waiting forever for a parent that is gone, adopted by PID 1 (a known
bubblewrap race). Such a child never ran the command, holds nothing but its own memory, and has
no other way to end: the next Kestrel that starts a sandbox ends it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

MARKER = "kestrel-sandbox"
"""The `$0` of every command Kestrel runs in bubblewrap, so its processes can be told apart."""


def sweep(proc: Path = Path("/proc")) -> list[int]:
    """SIGKILL every stuck sandbox of this user: a `bwrap` process carrying Kestrel's marker,
    adopted by PID 1, with no child. Return their ids. Does nothing when this process is PID 1
    (then a live Kestrel's own bubblewrap has PID 1 as its parent too)."""
    if os.getpid() == 1:
        return []
    killed = []
    for pid in _stuck(proc):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue  # Gone already, or not ours.
        killed.append(pid)
    return killed


def _stuck(proc: Path) -> Iterator[int]:
    uid = os.getuid()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid or (entry / "comm").read_text().strip() != "bwrap":
                continue
            status = _status(entry)
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            children = (entry / "task" / entry.name / "children").read_text().split()
        except OSError:
            continue
        orphaned = status.get("PPid") == "1" and status.get("State", "")[:1] not in ("Z", "X")
        if orphaned and MARKER.encode() in argv and not children:
            yield int(entry.name)


def _status(entry: Path) -> dict[str, str]:
    fields = {}
    for line in (entry / "status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields
