"""A torn or foreign `sessions.db`: every command says so in one line and points to the repair,
which saves what can be read, keeps the damaged file, and lets new sessions run again."""

from __future__ import annotations

import re

import pytest
from fault_kit import Kestrel, one_line

COMMANDS = (
    ("sessions", "list"),
    ("sessions", "show", "{id}"),
    ("sessions", "export", "{id}"),
    ("diff", "{id}"),
    ("resume", "{id}", "-p", "go on"),
)


def _two_sessions(kestrel: Kestrel) -> list[str]:
    for project in (kestrel.project, kestrel.new_project("other")):
        done = kestrel.run(*kestrel.task(project), project=project)
        assert done.returncode == 0, done.stderr
    return kestrel.session_ids()


def _assert_every_command_points_to_the_repair(kestrel: Kestrel, session_id: str) -> None:
    for command in COMMANDS:
        done = kestrel.run(*(word.format(id=session_id) for word in command))
        assert done.returncode == 2, (command, done.stderr)
        line = one_line(done.stderr)
        assert "is damaged" in line and "kestrel doctor --repair" in line, command
    new = kestrel.run(*kestrel.task())
    assert new.returncode == 2 and "kestrel doctor --repair" in one_line(new.stderr)


def test_a_torn_store_is_refused_then_repaired_keeping_what_was_whole(kestrel: Kestrel) -> None:
    ids = _two_sessions(kestrel)
    events = kestrel.sql("SELECT COUNT(*) FROM events")[0][0]
    whole = kestrel.db.read_bytes()
    assert not kestrel.db.with_name("sessions.db-wal").exists()
    kestrel.db.write_bytes(whole[: len(whole) - 4096 - 1000])  # Cut mid-page, near the end.
    _assert_every_command_points_to_the_repair(kestrel, ids[0])

    repaired = kestrel.run("doctor", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    said = re.search(r"saved (\d+) sessions? and (\d+) events?", repaired.stdout)
    assert said is not None, repaired.stdout
    assert int(said[1]) >= 1 and 0 < int(said[2]) <= events
    broken = list(kestrel.data.glob("sessions.db.broken-*"))
    assert len(broken) == 1
    assert broken[0].read_bytes() == whole[: len(whole) - 4096 - 1000]
    assert set(kestrel.session_ids()) <= set(ids) and kestrel.session_ids()
    for session_id in kestrel.session_ids():
        shown = kestrel.run("sessions", "export", session_id)
        assert shown.returncode == 0, shown.stderr

    again = kestrel.run(*kestrel.task(kestrel.new_project("third")), project=kestrel.tmp / "third")
    assert again.returncode == 0, again.stderr
    assert len(kestrel.session_ids()) == int(said[1]) + 1
    assert "intact" in kestrel.run("doctor", "--repair").stdout


@pytest.mark.parametrize(
    "content",
    [b"not a database at all\n" * 300, b"SQLite format 3\x00" + b"\xff" * 8000],
    ids=["text", "garbled header"],
)
def test_a_file_that_is_not_a_database_is_moved_aside(kestrel: Kestrel, content: bytes) -> None:
    kestrel.data.mkdir()
    kestrel.db.write_bytes(content)
    _assert_every_command_points_to_the_repair(kestrel, "abc")
    repaired = kestrel.run("doctor", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "saved 0 sessions and 0 events" in repaired.stdout
    done = kestrel.run(*kestrel.task())
    assert done.returncode == 0, done.stderr
    assert len(kestrel.session_ids()) == 1


def test_the_doctor_names_a_damaged_store_and_its_fix(kestrel: Kestrel) -> None:
    _two_sessions(kestrel)
    whole = kestrel.db.read_bytes()
    kestrel.db.write_bytes(whole[:-1000])
    report = kestrel.run("doctor")
    assert re.search(r"FAIL\s+event store: .*is damaged", report.stdout), report.stdout
    assert "fix: kestrel doctor --repair" in report.stdout
