"""The parts of cold storage that need no object store: archive URLs, the setting, when a change
still waits, and what a restore refuses to unpack whatever the checksum says."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pytest
from small_session import make_session

from kestrel.archive import ArchiveDamaged, Restorer
from kestrel.archive.archiver import change_pending
from kestrel.archive.blobs import Place, parse, split_location
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ChangesApplied, CheckpointCreated, Event, Rewound
from kestrel.settings_load import load_settings
from kestrel.store.sqlite import SQLiteStore
from kestrel.store.tombstones import StoredRow, Tombstone


@pytest.mark.parametrize(
    ("url", "place"),
    [
        ("file:///srv/archive/", Place("file", "/srv/archive", "")),
        ("/srv/archive", Place("file", "/srv/archive", "")),
        ("s3://bucket", Place("s3", "bucket", "")),
        ("s3://bucket/a/b/", Place("s3", "bucket", "a/b")),
        (
            "s3://bucket/p?endpoint=http://127.0.0.1:9000&region=eu-west-1",
            Place(
                "s3",
                "bucket",
                "p",
                (("endpoint", "http://127.0.0.1:9000"), ("region", "eu-west-1")),
            ),
        ),
    ],
)
def test_archive_urls(url: str, place: Place) -> None:
    assert parse(url) == place
    key = "0123abcd.tar.gz"
    assert split_location(place.location(key)) == (place, key)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("s3://key:secret@bucket/p", "no credentials"),
        ("s3://bucket/p?token=x", "unknown option 'token'"),
        ("https://example.com/x", "file:///folder or s3://bucket/prefix"),
        ("file://host/x", "file:///absolute/folder"),
    ],
)
def test_bad_archive_urls_are_refused_with_the_reason(url: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=says):
        parse(url)
    with pytest.raises(ConfigError, match="KESTREL_ARCHIVE_URL"):
        load_settings(tmp_path, env={"KESTREL_ARCHIVE_URL": url}, flags={}, home=tmp_path)


def test_the_settings_read_the_archive_place_and_age(tmp_path: Path) -> None:
    env = {"KESTREL_ARCHIVE_URL": "s3://b/p", "KESTREL_ARCHIVE_IDLE_DAYS": "7"}
    settings = load_settings(tmp_path, env=env, flags={}, home=tmp_path)
    assert (settings.archive_url, settings.archive_idle_days) == ("s3://b/p", 7.0)
    default = load_settings(tmp_path, env={}, flags={}, home=tmp_path)
    assert (default.archive_url, default.archive_idle_days) == (None, 30.0)


def _made(cid: str, tree: str, *, baseline: bool = False) -> CheckpointCreated:
    return CheckpointCreated(checkpoint_id=cid, label=cid, tree=tree, baseline=baseline)


@pytest.mark.parametrize(
    ("events", "pending"),
    [
        ([], False),
        ([_made("a", "t1"), _made("b", "t2")], True),
        ([_made("a", "t1"), ChangesApplied(outcome="applied", checkpoint_id="a")], False),
        ([_made("a", "t1"), ChangesApplied(outcome="conflicts", checkpoint_id="a")], True),
        ([_made("a", "t1"), ChangesApplied(outcome="discarded", checkpoint_id="a")], False),
        (
            [
                _made("a", "t1"),
                _made("b", "t2"),
                ChangesApplied(outcome="applied", checkpoint_id="b"),
                _made("b", "", baseline=True),
                Rewound(checkpoint_id="a", to_seq=1),
            ],
            True,
        ),
        ([_made("a", "t1", baseline=True), _made("b", "t1")], False),
    ],
)
def test_when_a_change_still_waits(events: list[Event], pending: bool) -> None:
    assert change_pending(events) is pending


def _bad_members(sid: str) -> list[list[tuple[str, bytes | str]]]:
    """Member lists a restore must refuse: ("name", content) files, ("name", "->target") links."""
    layer = f"data/overlays/{sid}/upper"
    return [
        [(f"{layer}/../../../../../escaped.txt", b"x")],
        [(f"{layer}/ln", "->/tmp"), (f"{layer}/ln/escaped.txt", b"x")],
        [("data/artifacts/someone-else/x", b"x")],
        [("/escaped.txt", b"x")],
    ]


@pytest.mark.parametrize("case", range(4))
def test_a_restore_refuses_members_outside_the_session(case: int, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with SQLiteStore(data / "sessions.db", restorer=Restorer(data)) as store:
        sid = make_session(store, data, tmp_path / "work")
        summary = next(s for s in store.sessions() if s.session_id == sid)
        rows = store.rows(sid)
        obj = tmp_path / "objects" / f"{sid}.tar.gz"
        obj.parent.mkdir()
        _write_object(obj, sid, summary.status, summary.events, rows, _bad_members(sid)[case])
        blob = obj.read_bytes()
        store.bury(
            Tombstone(
                session_id=sid,
                location=obj.as_uri(),
                digest=hashlib.sha256(blob).hexdigest(),
                size=len(blob),
                archived_at=0.0,
                status=summary.status,
                last_seq=summary.events,
                rows=len(rows),
            )
        )
        with pytest.raises(ArchiveDamaged, match=f"session {sid}"):
            store.read(sid)
        assert store.tombstone(sid) is not None
    assert not list(tmp_path.rglob("escaped.txt"))


def _write_object(
    path: Path,
    sid: str,
    status: str,
    last: int,
    rows: Sequence[StoredRow],
    members: list[tuple[str, bytes | str]],
) -> None:
    """An object in the archive's format whose folders hold `members`."""
    events = "".join(json.dumps(asdict(row)) + "\n" for row in rows).encode()
    manifest = {
        "format": 1,
        "session_id": sid,
        "archived_at": 0.0,
        "status": status,
        "last_seq": last,
        "rows": len(rows),
        "events_sha256": hashlib.sha256(events).hexdigest(),
        "folders": [f"overlays/{sid}"],
        "xattrs": {},
        "checkpoints": [],
    }
    with tarfile.open(path, "w:gz") as tar:
        head: list[tuple[str, bytes | str]] = [
            ("manifest.json", json.dumps(manifest).encode()),
            ("events.jsonl", events),
        ]
        for name, content in [*head, *members]:
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content.removeprefix("->")
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
