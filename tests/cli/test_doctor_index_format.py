"""doctor says what the next session does with an index an earlier Kestrel wrote."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from kestrel.cli.doctor_checks import index_check
from kestrel.context.index_store import MIGRATED_SCHEMAS, index_path_for


def index_with_schema(root: Path, cache: Path, schema: str) -> None:
    path = index_path_for(root, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE files (path TEXT, size INTEGER, mtime_ns INTEGER)")
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (schema,))
        db.commit()


def test_a_format_updated_in_place_is_not_called_a_rebuild(tmp_path: Path) -> None:
    root, cache = tmp_path / "repo", tmp_path / "cache"
    root.mkdir()
    index_with_schema(root, cache, sorted(MIGRATED_SCHEMAS)[0])
    check = index_check([root], cache, now=0.0)
    assert "updates it in place" in check.detail and "updates it now" in (check.fix or "")


def test_an_older_format_is_rebuilt(tmp_path: Path) -> None:
    root, cache = tmp_path / "repo", tmp_path / "cache"
    root.mkdir()
    index_with_schema(root, cache, "1")
    check = index_check([root], cache, now=0.0)
    assert "rebuilds it" in check.detail
