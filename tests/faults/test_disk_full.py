"""A full disk during a session: one line, exit 1, nothing half written, and the session resumes."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fault_kit import RUN_FLAGS, Kestrel, one_line

# Room for the store as it is plus a few dozen commits of its write-ahead log: the run that
# follows needs more, so it meets the limit part-way, after its first events are committed.
ROOM_FOR_WAL = 96 * 1024


def _finished_session(kestrel: Kestrel) -> str:
    done = kestrel.run(*kestrel.task())
    assert done.returncode == 0, done.stderr
    return kestrel.session_ids()[0]


def _assert_whole(kestrel: Kestrel, session_id: str) -> None:
    """The log holds every seq from 1 to the session's last, and the file is consistent."""
    assert kestrel.sql("PRAGMA integrity_check") == [("ok",)]
    seqs = [
        row[0] for row in kestrel.sql("SELECT seq FROM events WHERE session_id = ?", session_id)
    ]
    last = kestrel.sql("SELECT last_seq FROM sessions WHERE id = ?", session_id)
    assert seqs == list(range(1, len(seqs) + 1)) and last == [(len(seqs),)]


def test_a_file_size_limit_mid_session_stops_it_with_one_line_and_it_resumes(
    kestrel: Kestrel,
) -> None:
    earlier = _finished_session(kestrel)
    other = kestrel.new_project("other")
    limit = kestrel.db.stat().st_size + ROOM_FOR_WAL
    stopped = kestrel.run(*kestrel.task(other), project=other, fsize=limit)
    assert stopped.returncode == 1, stopped.stderr
    line = one_line(stopped.stderr)
    assert "no space left to write the event store" in line
    session_id = next(s for s in kestrel.session_ids() if s != earlier)
    assert f"continue it with: kestrel resume {session_id}" in line
    _assert_whole(kestrel, session_id)
    assert len(kestrel.sql("SELECT seq FROM events WHERE session_id = ?", session_id)) > 1

    resumed = kestrel.run("resume", session_id, "-p", *RUN_FLAGS, project=other)
    assert resumed.returncode == 0, resumed.stderr
    assert "return a + b" in (other / "calc.py").read_text(), resumed.stdout + resumed.stderr
    assert kestrel.sql("SELECT status FROM sessions ORDER BY created_at") == [("done",), ("done",)]
    _assert_whole(kestrel, earlier)


def _mount_tmpfs(where: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return made.returncode == 0


def test_a_really_full_disk_says_the_disk_is_full(kestrel: Kestrel, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    try:
        kestrel.vars["KESTREL_DATA_DIR"] = str(disk / "data")
        kestrel.data, kestrel.db = disk / "data", disk / "data" / "sessions.db"
        earlier = _finished_session(kestrel)
        free = shutil.disk_usage(disk).free
        (disk / "filler").write_bytes(b"\0" * max(free - ROOM_FOR_WAL, 0))
        other = kestrel.new_project("other")
        stopped = kestrel.run(*kestrel.task(other), project=other)
        assert stopped.returncode == 1, stopped.stderr
        line = one_line(stopped.stderr)
        assert "the disk is full" in line and "kestrel resume" in line
        (disk / "filler").unlink()
        session_id = next(s for s in kestrel.session_ids() if s != earlier)
        _assert_whole(kestrel, session_id)
        resumed = kestrel.run("resume", session_id, "-p", *RUN_FLAGS, project=other)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)
