"""What only the SQLite store promises: its file, its schema, and how it reports a bad file."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from store_helpers import started

from kestrel.protocol.events import UserMessage
from kestrel.store import STORE_SCHEMA_VERSION, SQLiteStore, StoreError


def test_creates_parent_directories_and_keeps_records_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "sessions.db"
    with SQLiteStore(path) as store:
        first = store.append("s1", started("s1"))
        second = store.append("s1", UserMessage(text="kept"))
    assert path.is_file()
    with SQLiteStore(path, synchronous="FULL") as again:
        assert list(again.read("s1")) == [first, second]
        assert again.append("s1", UserMessage(text="next")).seq == 3
        assert again.sessions()[0].events == 3


def test_schema_wal_mode_and_version(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == STORE_SCHEMA_VERSION
        sessions = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
        assert sessions == [
            "id",
            "created_at",
            "updated_at",
            "task",
            "cwd",
            "model",
            "status",
            "last_seq",
        ]
        events = {row[1]: row[5] for row in conn.execute("PRAGMA table_info(events)")}
        assert events == {"session_id": 1, "seq": 2, "at": 0, "type": 0, "json": 0}
    finally:
        conn.close()


def test_rejects_a_bad_synchronous_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NORMAL or FULL"):
        SQLiteStore(tmp_path / "s.db", synchronous="OFF")  # type: ignore[arg-type]


def test_refuses_a_store_written_by_a_newer_kestrel(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(
        StoreError, match=r"schema version 2, but this Kestrel reads up to version 1"
    ):
        SQLiteStore(path)


def test_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    path.write_bytes(b"this is not sqlite, it is just text\n" * 200)
    with pytest.raises(StoreError, match=r"is damaged .*kestrel doctor --repair"):
        SQLiteStore(path)


def _tamper(path: Path, seq: int, text: str, kind: str = "user_message") -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO events (session_id, seq, at, type, json) VALUES ('s1', ?, 0, ?, ?)",
            (seq, kind, text),
        )
    conn.close()


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{"v":1,"session_id":"s1","seq":2,"at":0,"event":{"type":"telepathy"}}', "telepathy"),
        ('{"v":9,"session_id":"s1","seq":2,"at":0,"event":{"type":"user_message"}}', "version 9"),
        ("{not json", "not JSON"),
        (
            '{"v":1,"session_id":"s9","seq":7,"at":0,"event":{"type":"user_message","text":""}}',
            "the stored record says session 's9', seq 7",
        ),
    ],
)
def test_a_bad_row_is_quarantined_with_a_warning_naming_session_and_seq(
    tmp_path: Path, text: str, detail: str
) -> None:
    path = tmp_path / "sessions.db"
    warnings: list[str] = []
    with SQLiteStore(path, warn=warnings.append) as store:
        store.append("s1", started("s1"))
        _tamper(path, 2, text)
        assert [r.seq for r in store.read("s1")] == [1]
        assert len(warnings) == 1
        assert warnings[0].startswith("warning: session 's1', seq 2 cannot be read (")
        assert detail in warnings[0]
        assert store.quarantined() == 1
        assert [r.seq for r in store.read("s1")] == [1]
        assert len(warnings) == 1  # Set aside once, not warned about on every read.
        # The tampering never moved the session's last seq, so the next append takes seq 2.
        store.append("s1", UserMessage(text="on"))
        assert [r.seq for r in store.read("s1")] == [1, 2]


async def test_in_process_append_wakes_a_subscriber_without_polling(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db", poll_interval_s=3600) as store:
        store.append("s1", started("s1"))
        it = store.subscribe("s1", after_seq=1)
        pending = asyncio.ensure_future(asyncio.wait_for(anext(it), 5))
        await asyncio.sleep(0.01)
        store.append("s1", UserMessage(text="now"))
        assert (await pending).seq == 2
        await it.aclose()  # type: ignore[attr-defined]
