"""One unreadable event row: its session is read without it, with one warning; nothing else is
affected, and the row is kept in the store's quarantine table."""

from __future__ import annotations

import json

import pytest
from fault_kit import Kestrel, one_line

GARBAGE = {
    "json": "{this is not json",
    "type": json.dumps(
        {"v": 1, "session_id": "{id}", "seq": 3, "at": 0, "event": {"type": "telepathy"}}
    ),
}


def _two_sessions(kestrel: Kestrel) -> tuple[str, str]:
    for project in (kestrel.project, kestrel.new_project("other")):
        done = kestrel.run(*kestrel.task(project), project=project)
        assert done.returncode == 0, done.stderr
    first, second = kestrel.session_ids()
    return first, second


def _export(kestrel: Kestrel, session_id: str) -> list[int]:
    done = kestrel.run("sessions", "export", session_id)
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["seq"] for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("garbage", GARBAGE, ids=list(GARBAGE))
def test_a_corrupt_row_is_quarantined_and_the_rest_still_works(
    kestrel: Kestrel, garbage: str
) -> None:
    broken, healthy = _two_sessions(kestrel)
    seqs = {sid: _export(kestrel, sid) for sid in (broken, healthy)}
    text = GARBAGE[garbage].replace("{id}", broken)
    kestrel.sql("UPDATE events SET json = ? WHERE session_id = ? AND seq = 3", text, broken)

    shown = kestrel.run("sessions", "show", broken)
    assert shown.returncode == 0, shown.stderr
    warning = one_line(shown.stderr)
    assert f"session '{broken}', seq 3 cannot be read" in warning and "quarantined" in warning
    assert _export(kestrel, broken) == [s for s in seqs[broken] if s != 3]
    assert _export(kestrel, healthy) == seqs[healthy]
    kept = kestrel.sql("SELECT session_id, seq, json FROM quarantine")
    assert kept == [(broken, 3, text)]

    for command in (("diff",), ("discard",), ("apply",)):
        on_broken = kestrel.run(*command, broken)
        on_healthy = kestrel.run(*command, healthy)
        assert "Traceback" not in on_broken.stderr
        assert on_broken.returncode == on_healthy.returncode, (command, on_broken.stderr)
    resumed = kestrel.run("resume", broken, "-p", "and now?")
    assert "Traceback" not in resumed.stderr
    assert resumed.returncode == kestrel.run("resume", healthy, "-p", "and now?").returncode


def test_a_row_that_is_not_json_does_not_stop_the_session_list(kestrel: Kestrel) -> None:
    broken, healthy = _two_sessions(kestrel)
    kestrel.sql("UPDATE events SET json = 'garbage' WHERE session_id = ? AND seq = 1", broken)
    listed = kestrel.run("sessions", "list", "--all")
    assert listed.returncode == 0, listed.stderr
    assert f"session '{broken}', seq 1 cannot be read (not JSON)" in one_line(listed.stderr)
    assert broken[:8] in listed.stdout and healthy[:8] in listed.stdout
    report = kestrel.run("doctor")
    assert "event store: " in report.stdout
    assert "1 unreadable event set aside in its quarantine table" in report.stdout, report.stdout
