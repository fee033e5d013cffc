"""Reopening an index nothing has written to since its snapshot: the rows are not read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from context_kit import committed_repo, decoded_rows
from test_index_reopen import (
    FILES,
    answers,
    decoded_answers,
    indexed,
    serves_the_three_changes,
    three_changed_after_snapshot,
    write,
)

from kestrel.context import loading
from kestrel.context.engine import ContextEngine
from kestrel.context.index_store import IndexStore, index_path_for


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "repo", FILES)


def written_after_snapshot(repo: Path, cache: Path, files: dict[str, str]) -> None:
    """Index, snapshot, then change `files` and refresh: saved and logged, no new snapshot."""
    indexed(repo, cache)
    engine = ContextEngine.open(repo, cache)
    write(repo, files)
    engine.refresh()
    engine.close()


def two_written_after_snapshot(repo: Path, cache: Path) -> None:
    files = {"shop/cart.py": "class Basket:\n    pass\n", "shop/catalog.py": "X = 1\n"}
    written_after_snapshot(repo, cache, files)


def count_heads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = IndexStore.heads

    def counted(self: IndexStore) -> list[tuple[str, int, int, str, str]]:
        calls.append(1)
        return real(self)  # type: ignore[return-value]

    monkeypatch.setattr(IndexStore, "heads", counted)
    return calls


def test_an_unwritten_index_reopens_without_reading_its_rows(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    calls = count_heads(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot and calls == []
    cart = engine.record("shop/cart.py")
    assert cart is not None and not cart.loaded
    assert cart.size == len(FILES["shop/cart.py"])
    lazy = answers(engine)
    assert engine.refresh().changed == 0  # the stats taken from the snapshot are the files'
    engine.close()
    assert lazy == decoded_answers(repo, cache)


def test_after_writes_the_reopen_reads_only_the_rows_written_since(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    three_changed_after_snapshot(repo, cache)
    calls = count_heads(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot and calls == []
    serves_the_three_changes(engine)
    assert engine.refresh().changed == 0
    lazy = answers(engine)
    engine.close()
    assert lazy == decoded_answers(repo, cache)


@pytest.mark.parametrize(
    ("share", "reads_every_row"),
    [
        (0.1, True),  # two written, more than one may be: every row is read and compared
        (0.5, False),  # half the files may have changed: the log is trusted for both
    ],
)
def test_the_log_is_trusted_for_as_many_files_as_a_snapshot_may_lack(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float, reads_every_row: bool
) -> None:
    cache = tmp_path / "cache"
    two_written_after_snapshot(repo, cache)
    monkeypatch.setattr(loading, "MAX_CHANGED_FILES", 1)
    monkeypatch.setattr(loading, "MAX_CHANGED_SHARE", share)
    calls = count_heads(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert calls == ([1] if reads_every_row else [])
    assert engine.definitions_named("Basket") != []
    engine.close()


def test_a_stat_only_change_is_logged_too(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    # The same bytes, a new mtime.
    written_after_snapshot(repo, cache, {"shop/cart.py": FILES["shop/cart.py"]})
    calls = count_heads(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert calls == []
    cart = engine.record("shop/cart.py")
    assert cart is not None and cart.mtime_ns == (repo / "shop/cart.py").stat().st_mtime_ns
    assert engine.refresh().changed == 0
    engine.close()


def test_another_writer_to_the_same_index_leaves_no_generation(tmp_path: Path) -> None:
    path = index_path_for(tmp_path.resolve(), tmp_path / "cache")
    first = IndexStore(path)
    first.touch([])
    second = IndexStore(path)
    second.touch([])
    assert second.generation is not None  # it saw the first one's last write
    first.touch([])  # finds the second one's stamp: its own records may lack those changes
    assert first.generation is None
    reopened = IndexStore(path)
    assert reopened.generation not in (None, second.generation)
    for store in (first, second, reopened):
        store.close()


def test_a_record_written_without_a_stamp_still_makes_the_reopen_read_the_rows(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    # An older Kestrel writes rows without stamping the index: a replaced row gets a new id.
    with sqlite3.connect(index_path_for(repo.resolve(), cache)) as db:
        db.execute("INSERT OR REPLACE INTO files SELECT * FROM files WHERE path = 'README.md'")
    calls = count_heads(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert calls == [1]
    engine.close()


def test_the_log_is_pruned_to_what_the_snapshot_holds(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    db_path = index_path_for(repo.resolve(), cache)
    engine = ContextEngine.open(repo, cache)
    engine.close()
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT COUNT(*) FROM written").fetchone()[0] == 0
    engine = ContextEngine.open(repo, cache)
    write(repo, {"shop/cart.py": "class Basket:\n    pass\n"})
    engine.refresh()
    engine.close()
    with sqlite3.connect(db_path) as db:
        assert [r[0] for r in db.execute("SELECT path FROM written")] == ["shop/cart.py"]


def test_a_file_changed_and_changed_back_keeps_its_stored_body(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    engine = ContextEngine.open(repo, cache)
    write(repo, {"shop/cart.py": "class Basket:\n    pass\n"})  # a checkout...
    engine.refresh()
    write(repo, {"shop/cart.py": FILES["shop/cart.py"]})  # ...and back
    engine.refresh()
    engine.close()
    decoded = decoded_rows(monkeypatch)
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot and decoded == []
    cart = engine.record("shop/cart.py")
    assert cart is not None and not cart.loaded  # still the snapshot's body, under its new stat
    assert cart.mtime_ns == (repo / "shop/cart.py").stat().st_mtime_ns
    assert engine.definitions_named("Basket") == []
    assert engine.refresh().changed == 0
    lazy = answers(engine)
    engine.close()
    assert lazy == decoded_answers(repo, cache)
