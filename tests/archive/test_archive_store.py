"""Archive and restore through the library, over SQLite and PostgreSQL: what comes back is what
went, the listing shows the session meanwhile, and any way of opening it restores it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from archive_kit import local_copy
from small_session import COST, checkpoints_of, make_session

from kestrel.archive import Archived, Archiver, Blobs, Restorer, Skipped
from kestrel.archive.blobs import default_url, parse
from kestrel.protocol.events import UserMessage
from kestrel.store.base import SessionSummary
from kestrel.store.sqlite import SQLiteStore
from kestrel.store.tombstones import ARCHIVED, ArchiveConflict, ArchiveLog, SessionArchived


@pytest.fixture(params=["sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ArchiveLog, Path]]:
    """A store that restores into the data directory beside it, and that directory."""
    data = tmp_path / "data"
    with contextlib.ExitStack() as stack:
        if request.param == "postgres":
            from pg_helpers import fresh_database

            from kestrel.store.postgres import PostgresStore

            url = stack.enter_context(fresh_database())
            store: ArchiveLog = PostgresStore(url, restorer=Restorer(data))
        else:
            store = SQLiteStore(data / "sessions.db", restorer=Restorer(data))
        stack.callback(store.close)
        yield store, data


def _archiver(store: ArchiveLog, data: Path) -> Archiver:
    return Archiver(store, data, Blobs(parse(default_url(data))))


def _summary(store: ArchiveLog, sid: str) -> SessionSummary:
    return next(s for s in store.sessions() if s.session_id == sid)


def test_archived_session_comes_back_whole_when_read(
    opened: tuple[ArchiveLog, Path], tmp_path: Path
) -> None:
    store, data = opened
    sid = make_session(store, data, tmp_path / "work")
    rows, files, listed = store.rows(sid), local_copy(data, sid), _summary(store, sid)
    history = [(c.id, c.tree, c.label) for c in checkpoints_of(data, tmp_path / "work", sid).list()]

    done = _archiver(store, data).archive(listed)

    assert isinstance(done, Archived), done
    assert done.location.startswith("file://") and done.location.endswith(f"/{sid}.tar.gz")
    assert local_copy(data, sid) == {} and store.rows(sid) == []
    shown = _summary(store, sid)
    assert shown.status == ARCHIVED
    assert (shown.cost_usd, shown.turns, shown.events) == (COST, 1, listed.events)
    assert not (data / "checkpoints").exists() or not any((data / "checkpoints").iterdir())

    records = store.read(sid)  # the seam: any read of the session restores it first

    assert [r.seq for r in records] == [r.seq for r in rows]
    assert store.rows(sid) == rows
    assert local_copy(data, sid) == files
    assert _summary(store, sid) == listed
    again = checkpoints_of(data, tmp_path / "work", sid)
    assert [(c.id, c.tree, c.label) for c in again.list()] == history
    again.restore(history[0][0])  # and a rewind works on what came back
    assert (tmp_path / "work" / "a.txt").read_text() == "one\n"


def test_an_append_to_an_archived_session_restores_it_first(
    opened: tuple[ArchiveLog, Path], tmp_path: Path
) -> None:
    store, data = opened
    sid = make_session(store, data, tmp_path / "work")
    last = store.rows(sid)[-1].seq
    assert isinstance(_archiver(store, data).archive(_summary(store, sid)), Archived)

    record = store.append(sid, UserMessage(text="one more thing"))

    assert record.seq == last + 1
    assert [r.seq for r in store.read(sid)][-2:] == [last, last + 1]
    assert (data / "overlays" / sid / "upper" / "src" / "new.py").is_file()


def test_a_store_without_a_restorer_says_the_session_is_archived(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SQLiteStore(data / "sessions.db") as store:
        sid = make_session(store, data, tmp_path / "work")
        assert isinstance(_archiver(store, data).archive(_summary(store, sid)), Archived)
        with pytest.raises(SessionArchived, match=f"session {sid} is archived"):
            store.read(sid)
        with pytest.raises(SessionArchived):
            store.append(sid, UserMessage(text="hello"))
    with SQLiteStore(data / "sessions.db", restorer=Restorer(data)) as store:
        assert store.read(sid)[-1].event.type == "session_finished"


def test_a_session_that_moved_on_is_not_buried(
    opened: tuple[ArchiveLog, Path], tmp_path: Path
) -> None:
    store, data = opened
    sid = make_session(store, data, tmp_path / "work")
    listed = _summary(store, sid)
    store.append(sid, UserMessage(text="a late answer"))  # after the archiver looked
    archived = _archiver(store, data).archive(listed)

    assert isinstance(archived, Skipped)
    assert "changed while it was being archived" in archived.reason
    assert "nothing was removed" in archived.reason
    assert store.tombstone(sid) is None and len(store.rows(sid)) == listed.events + 1
    assert (data / "overlays" / sid / "upper" / "run.sh").is_file()


def test_bury_checks_the_session_is_as_the_tombstone_says(
    opened: tuple[ArchiveLog, Path], tmp_path: Path
) -> None:
    from kestrel.store.tombstones import Tombstone

    store, data = opened
    sid = make_session(store, data, tmp_path / "work")
    listed = _summary(store, sid)
    stale = Tombstone(
        session_id=sid,
        location="file:///nowhere/x.tar.gz",
        digest="0" * 64,
        size=1,
        archived_at=0.0,
        status=listed.status,
        last_seq=listed.events - 1,
        rows=listed.events - 1,
    )
    with pytest.raises(ArchiveConflict, match="nothing was removed"):
        store.bury(stale)
    assert store.tombstone(sid) is None and len(store.rows(sid)) == listed.events


def test_running_sessions_and_waiting_changes_stay_unless_forced(
    opened: tuple[ArchiveLog, Path], tmp_path: Path
) -> None:
    store, data = opened
    running = make_session(store, data, tmp_path / "one", finish=False)
    archiver = _archiver(store, data)

    kept = archiver.archive(_summary(store, running))
    assert isinstance(kept, Skipped) and kept.reason.startswith("is running;")
    assert store.tombstone(running) is None

    forced = archiver.archive(_summary(store, running), force=True)
    assert isinstance(forced, Archived)
    assert isinstance(archiver.archive(_summary(store, running)), Skipped)  # archived already
