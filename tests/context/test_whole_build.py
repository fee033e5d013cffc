"""A big index read whole is written to its snapshot and served from it at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from context_kit import (
    assert_colonies_keep_working,
    colony_answers,
    colony_module,
    modules_repo,
)

import kestrel.context.engine as engine_module
import kestrel.context.indexing as indexing_module
import kestrel.context.whole as whole_module
from kestrel.context.engine import ContextEngine

MODULES = 40


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = modules_repo(tmp_path / "repo", MODULES, lambda i: colony_module(i, "walrus"))
    (root / "README.md").write_text("The walrus colony census.\n")
    return root


@pytest.fixture(autouse=True)
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexing_module, "BULK_MIN_FILES", 10)
    monkeypatch.setattr(engine_module, "LIGHTEN_MIN_FILES", 10**9)
    monkeypatch.setattr(whole_module, "WHOLE_MIN_FILES", 10)
    monkeypatch.setattr(whole_module, "PART_FILES", 7)


def built_in_memory(repo: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(whole_module, "WHOLE_MIN_FILES", 10**9)
    engine = ContextEngine.open(repo, cache, workers=0)
    try:
        engine.refresh()
        assert not engine.lightened
        return colony_answers(engine)
    finally:
        engine.close()
        monkeypatch.setattr(whole_module, "WHOLE_MIN_FILES", 10)


def reopened_finds_narwhals(repo: Path, cache: Path, path: str) -> None:
    """Reopened, the index serves from its snapshot, up to date with the files on disk."""
    again = ContextEngine.open(repo, cache, workers=0)
    try:
        assert again.opened_from_snapshot and not again.notice
        assert [h.path for h in again.search("narwhal colony").files][:1] == [path]
        assert again.refresh().changed == 0
    finally:
        again.close()


def test_it_serves_from_the_snapshot_and_answers_as_built_in_memory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = built_in_memory(repo, tmp_path / "memory", monkeypatch)
    written: list[int] = []
    real = indexing_module.stored_part

    def counted(store: Any, records: Any) -> Any:
        out = real(store, records)
        written.append(len(out))
        return out

    monkeypatch.setattr(indexing_module, "stored_part", counted)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        report = engine.refresh()
        assert written == [32, 9]  # one part per batch read (32 files), each past PART_FILES
        assert not list((tmp_path / "cache").rglob("*.tmp"))
        assert engine.lightened  # at once: no postings were built in memory to wait for
        assert not any(r.loaded for r in engine._records.values())
        assert report.files_total == MODULES + 1 and report.files_ranked == MODULES + 1
        assert colony_answers(engine) == want
        assert_colonies_keep_working(engine, repo)
    finally:
        engine.close()
    reopened_finds_narwhals(repo, tmp_path / "cache", "app/mod_03.py")


def test_a_failed_write_builds_in_memory_instead(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = built_in_memory(repo, tmp_path / "memory", monkeypatch)

    def full_disk(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(whole_module, "write_snapshot", full_disk)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh()
        assert not engine.lightened
        assert colony_answers(engine) == want
    finally:
        engine.close()


def test_a_background_read_serves_from_the_snapshot_when_it_ends(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = built_in_memory(repo, tmp_path / "memory", monkeypatch)
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 10)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        assert engine.refresh(wait=False).pending == MODULES + 1
        engine.refresh()  # waits for the background read
        assert engine.lightened and engine.pending == 0
        assert colony_answers(engine) == want
    finally:
        engine.close()


def test_a_file_changed_while_the_snapshot_is_written_is_served_new(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 10)
    real = whole_module.write_merged
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    changes: list[int] = []

    def then_a_change(path: Path, data: Any, *rest: Any) -> None:
        real(path, data, *rest)
        if not changes:  # off the lock: the change goes ahead, and this snapshot is not served
            (repo / "app" / "mod_05.py").write_text(colony_module(5, "narwhal"))
            changes.append(engine.refresh_paths(["app/mod_05.py"]))

    monkeypatch.setattr(whole_module, "write_merged", then_a_change)
    try:
        engine.refresh(wait=False)
        engine.refresh()
        assert changes == [1]
        assert engine.pending == 0
        assert [h.path for h in engine.search("narwhal colony").files][:1] == ["app/mod_05.py"]
    finally:
        engine.close()
    reopened_finds_narwhals(repo, tmp_path / "cache", "app/mod_05.py")


def test_a_background_read_serves_what_it_read_so_far_from_snapshots(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = built_in_memory(repo, tmp_path / "memory", monkeypatch)
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 10)
    monkeypatch.setattr(indexing_module, "REBUILD_MIN_FILES", 5)
    merged: list[int] = []
    real = whole_module.write_merged

    def counted(path: Path, data: Any, *rest: Any) -> None:
        merged.append(len(data.ranked) + len(data.others))
        real(path, data, *rest)

    monkeypatch.setattr(whole_module, "write_merged", counted)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        engine.refresh(wait=False)
        engine.refresh()
        assert merged == [32, MODULES + 1]  # after the first batch, then at the end
        assert engine.lightened and engine.pending == 0
        assert not any(r.loaded for r in engine._records.values())
        assert colony_answers(engine) == want
    finally:
        engine.close()


def test_a_part_that_cannot_be_written_keeps_the_records_in_memory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = built_in_memory(repo, tmp_path / "memory", monkeypatch)

    def full_disk(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(indexing_module, "stored_part", full_disk)
    monkeypatch.setattr(whole_module, "stored_part", full_disk)
    engine = ContextEngine.open(repo, tmp_path / "cache", workers=0)
    try:
        assert engine.refresh().files_total == MODULES + 1
        assert not engine.lightened and engine.pending == 0
        assert colony_answers(engine) == want
    finally:
        engine.close()
    assert not list((tmp_path / "cache").rglob("*.tmp"))
