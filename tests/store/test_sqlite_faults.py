"""The SQLite store under faults, in real files and real processes: typed errors, never SQLite's."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import started

from kestrel.protocol.errors import SessionLogLost, SessionNotFound, StoreDamaged
from kestrel.protocol.events import UserMessage
from kestrel.store import SQLiteStore
from kestrel.store.repair import damage, salvage

# Appends big messages under a file size limit until the store refuses one, lifts the limit,
# appends once more, and prints what happened as JSON.
FULL_CHILD = """
import json, resource, signal, sys
from pathlib import Path
from kestrel.protocol.errors import StoreFull
from kestrel.protocol.events import SessionStarted, UserMessage
from kestrel.store import SQLiteStore

path = Path(sys.argv[1])
store = SQLiteStore(path)
store.append("s1", SessionStarted(session_id="s1", task="t", cwd="/", model="scripted:m"))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
wal = Path(f"{path}-wal")
room = max(path.stat().st_size, wal.stat().st_size if wal.exists() else 0) + 64 * 1024
resource.setrlimit(resource.RLIMIT_FSIZE, (room, hard))
appended, error = 1, None
try:
    for _ in range(1000):
        store.append("s1", UserMessage(text="x" * 3000))
        appended += 1
except StoreFull as exc:
    error = {"session_id": exc.session_id, "message": str(exc)}
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
after = store.append("s1", UserMessage(text="room again")).seq
print(json.dumps({"appended": appended, "error": error, "after": after}))
"""


def test_a_full_disk_refuses_the_append_whole_and_the_store_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    done = subprocess.run(
        [sys.executable, "-c", FULL_CHILD, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["error"] is not None and result["error"]["session_id"] == "s1"
    assert "no space left to write the event store" in result["error"]["message"]
    assert 1 < result["appended"] < 1000
    assert result["after"] == result["appended"] + 1
    with SQLiteStore(path) as store:
        assert [r.seq for r in store.read("s1")] == list(range(1, result["after"] + 1))


def _torn(tmp_path: Path, cut: int) -> Path:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path) as store:
        for sid in ("a", "b"):
            store.append(sid, started(sid))
            for i in range(200):
                store.append(sid, UserMessage(text=f"{sid}-{i} " + "y" * 200))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - cut])
    return path


def test_a_torn_file_is_refused_on_open_with_the_repair_named(tmp_path: Path) -> None:
    path = _torn(tmp_path, 3000)
    with pytest.raises(StoreDamaged, match=r"ends in the middle of a page.*doctor --repair"):
        SQLiteStore(path)
    assert damage(path) is not None


def test_a_file_missing_whole_pages_is_refused_too(tmp_path: Path) -> None:
    path = _torn(tmp_path, 4096 * 3)
    with pytest.raises(StoreDamaged, match=r"holds .* of its .* pages"):
        SQLiteStore(path)


def test_salvage_keeps_what_is_whole_and_the_damaged_file(tmp_path: Path) -> None:
    path = _torn(tmp_path, 4096 * 3 + 100)
    damaged = path.read_bytes()
    saved = salvage(path, now=0)
    assert saved.broken == tmp_path / "sessions.db.broken-19700101T000000Z"
    assert saved.broken.read_bytes() == damaged
    assert saved.sessions == 2 and 300 < saved.events < 402
    assert damage(path) is None
    with SQLiteStore(path) as store:
        counts = {s.session_id: s.events for s in store.sessions()}
        assert sum(len(store.read(sid)) for sid in counts) == saved.events
        last = counts["a"]
        assert store.append("a", UserMessage(text="on")).seq == last + 1


def test_rows_deleted_under_a_writing_store_lose_the_session_loudly(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path) as store:
        store.append("s1", started("s1"))
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("DELETE FROM events")
            conn.execute("DELETE FROM sessions")
        conn.close()
        with pytest.raises(SessionLogLost, match="s1's log was deleted") as caught:
            store.append("s1", UserMessage(text="lost"))
        assert caught.value.session_id == "s1"
        with pytest.raises(SessionNotFound):  # Never written by this store: a caller's mistake.
            store.append("s2", UserMessage(text="never started"))


def test_a_deleted_file_under_a_writing_store_loses_the_session_loudly(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path) as store:
        store.append("s1", started("s1"))
        os.unlink(path)
        with pytest.raises(SessionLogLost, match="deleted or replaced while session s1"):
            store.append("s1", UserMessage(text="into nothing"))


def test_a_row_that_is_not_json_is_swept_before_the_session_list(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    warnings: list[str] = []
    with SQLiteStore(path, warn=warnings.append) as store:
        store.append("s1", started("s1"))
        store.append("s2", started("s2"))
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE events SET json = 'garbage' WHERE session_id = 's1'")
        conn.close()
        assert {s.session_id for s in store.sessions()} == {"s1", "s2"}
        assert store.spent_since(0).calls == 0
        assert warnings == [
            "warning: session 's1', seq 1 cannot be read (not JSON); "
            "it was quarantined and is skipped"
        ]
        assert store.quarantined() == 1
