"""A running session's log deleted under it: the session notices at its next append and stops
with one line and exit 1, instead of writing on into a file nobody can read and exiting 0."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fault_kit import RUN_FLAGS, Kestrel, one_line


def _start_slow(kestrel: Kestrel) -> tuple[subprocess.Popen[str], str]:
    """A session that waits in a command; returned once that command has started."""
    script = f"scripted:{kestrel.tmp / 'slow.json'}"
    child = kestrel.start(
        *("-p", "wait", "--model", script, *RUN_FLAGS, "--output-format", "stream-json")
    )
    assert child.stdout is not None
    for line in child.stdout:
        record = json.loads(line)
        if record["event"]["type"] == "tool_started":
            return child, str(record["session_id"])
    raise AssertionError(f"the session never started its command: {child.communicate()}")


def _finished_session(kestrel: Kestrel) -> str:
    done = kestrel.run(*kestrel.task())
    assert done.returncode == 0, done.stderr
    return kestrel.session_ids()[0]


def test_rows_deleted_while_running_stop_the_session(kestrel: Kestrel) -> None:
    other = _finished_session(kestrel)
    child, session_id = _start_slow(kestrel)
    kestrel.sql("DELETE FROM events WHERE session_id = ?", session_id)
    kestrel.sql("DELETE FROM sessions WHERE id = ?", session_id)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 1, stderr
    line = one_line(stderr)
    assert f"session {session_id}'s log was deleted" in line
    assert kestrel.session_ids() == [other]


@pytest.mark.parametrize("replace", [False, True], ids=["deleted", "replaced"])
def test_the_store_file_deleted_while_running_stops_the_session(
    kestrel: Kestrel, replace: bool
) -> None:
    _finished_session(kestrel)
    child, session_id = _start_slow(kestrel)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{kestrel.db}{suffix}").unlink(missing_ok=True)
    if replace:  # Another process starts a fresh store meanwhile.
        assert kestrel.run("sessions", "list").returncode == 0
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 1, stderr
    line = one_line(stderr)
    assert "was deleted or replaced while session" in line and session_id in line
