"""Sandboxes a killed Kestrel left stuck in bubblewrap's start are ended by the next one.

A real stuck bubblewrap needs a kill inside a window of microseconds, so the tests stand one in:
a shell started under the name `bwrap` (a symlink), blocked on a FIFO, with Kestrel's marker in
its command line, adopted by PID 1 the way a bubblewrap child is when its parent dies.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from kestrel.sandbox.orphans import MARKER, sweep


def _start(tmp_path: Path, name: str, marker: str, *, orphan: bool) -> int:
    """Start a process named `name` that blocks until killed; return its id."""
    exe = tmp_path / name
    if not exe.exists():
        exe.symlink_to("/bin/sh")
    fifo = tmp_path / f"fifo-{len(list(tmp_path.iterdir()))}"
    os.mkfifo(fifo)
    pid_file = fifo.with_suffix(".pid")
    body = 'exec 3<>"$0"; read x <&3'
    line = f"{exe} -c '{body}' {fifo} {marker} & echo $! > {pid_file}"
    if orphan:
        subprocess.run(["sh", "-c", line], check=True)  # the shell exits: PID 1 adopts it
    else:
        subprocess.Popen(["sh", "-c", line + "; wait"])
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return int(pid_file.read_text())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _parent(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return line.split()[1]
    return ""


def test_only_a_stuck_sandbox_of_kestrel_is_ended(tmp_path: Path) -> None:
    stuck = _start(tmp_path, "bwrap", MARKER, orphan=True)
    if _parent(stuck) != "1":
        pytest.skip("a subreaper adopts orphans here, not PID 1")
    foreign = _start(tmp_path, "bwrap", "someone-else", orphan=True)
    running = _start(tmp_path, "bwrap", MARKER, orphan=False)
    other_name = _start(tmp_path, "sleeper", MARKER, orphan=True)
    try:
        killed = sweep()
        assert stuck in killed
        assert not {foreign, running, other_name} & set(killed)
        deadline = time.monotonic() + 10
        while _alive(stuck) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(stuck)
        assert _alive(foreign) and _alive(running) and _alive(other_name)
    finally:
        for pid in (stuck, foreign, running, other_name):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
