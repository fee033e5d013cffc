"""Checkpoints in shared storage: every checkpoint put as it is recorded, and a second machine
(a shadow repository and a worktree of its own) brought to the newest one, in a folder and in
an S3-compatible bucket."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from s3_server import S3Server

from kestrel.archive.blobs import Blobs, parse
from kestrel.archive.share import PREFIX, WorkspaceShare
from kestrel.workspace.checkpoints import Checkpoint, CheckpointStore

pytest.importorskip("obstore")

SESSION = "s1"


def _checkout(path: Path) -> Path:
    path.mkdir(parents=True)
    for n in range(20):
        (path / f"f{n}.txt").write_text(f"file {n}\n")
    (path / "gone.txt").write_text("deleted later\n")
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
        cwd=path,
        check=True,
    )
    return path


def _machine(tmp_path: Path, name: str, blobs: Blobs, worktree: Path) -> CheckpointStore:
    git_dir = tmp_path / name / "checkpoints"
    share = WorkspaceShare(blobs, git_dir, SESSION)
    return CheckpointStore(worktree, git_dir, session=SESSION, on_recorded=share.put)


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def _go_on_elsewhere(tmp_path: Path, blobs: Blobs) -> None:
    first_tree = _checkout(tmp_path / "a" / "work")
    first = _machine(tmp_path, "a", blobs, first_tree)
    first.snapshot("baseline")
    (first_tree / "f1.txt").write_text("changed on the first machine\n")
    (first_tree / "new.txt").write_text("added\n")
    first.snapshot("edit 1")
    (first_tree / "gone.txt").unlink()
    third = first.snapshot("edit 2")
    assert third is not None
    keys = blobs.keys(f"{PREFIX}/{SESSION}/")
    assert len(keys) == 3, keys  # One bundle per checkpoint, each holding only what is new.

    # The second machine: the same checkout (another copy of the same commit), nothing else.
    second_tree = tmp_path / "b" / "work"
    second_tree.parent.mkdir()
    shutil.copytree(tmp_path / "a" / "work", second_tree, symlinks=True)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=second_tree, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=second_tree, check=True)
    untouched = os.stat(second_tree / "f7.txt").st_mtime_ns
    second_share = WorkspaceShare(blobs, tmp_path / "b" / "checkpoints", SESSION)
    assert second_share.bring(third.id)
    second = _machine(tmp_path, "b", blobs, second_tree)
    second.materialise(third.id)
    assert _files(second_tree) == _files(first_tree)
    assert os.stat(second_tree / "f7.txt").st_mtime_ns == untouched  # Only changed files written.
    assert second.head_id() == third.id

    # It goes on there, and the first machine (stale) catches up the same way.
    (second_tree / "f2.txt").write_text("changed on the second machine\n")
    fourth = second.snapshot("edit 3")
    assert fourth is not None
    assert WorkspaceShare(blobs, tmp_path / "a" / "checkpoints", SESSION).bring(fourth.id)
    first.materialise(fourth.id)
    assert _files(first_tree) == _files(second_tree)
    assert [c.label for c in first.list()][-2:] == ["edit 2", "edit 3"]


def test_a_session_goes_on_elsewhere_through_a_folder(tmp_path: Path) -> None:
    _go_on_elsewhere(tmp_path, Blobs(parse((tmp_path / "shared").as_uri())))


def test_a_session_goes_on_elsewhere_through_a_bucket(
    tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)  # The standard AWS variables, as in production.
    _go_on_elsewhere(tmp_path, Blobs(parse(s3.url("share"))))


def test_a_checkpoint_never_stored_is_reported_missing(tmp_path: Path) -> None:
    blobs = Blobs(parse((tmp_path / "shared").as_uri()))
    share = WorkspaceShare(blobs, tmp_path / "b" / "checkpoints", SESSION)
    assert not share.bring("0" * 40)


def _on_a_worker(tmp_path: Path, text: str) -> tuple[Path, CheckpointStore, Checkpoint, Checkpoint]:
    """A worker that records a baseline and one edit of `f3.txt`, its checkpoints shared."""
    from kestrel.app_share import checkpointer_for
    from kestrel.settings import Settings

    worktree = _checkout(tmp_path / "work")
    runs = Settings(data_dir=tmp_path / "worker", workspace_share_url=_shared(tmp_path))
    recorder = checkpointer_for(runs, worktree, SESSION).store
    base = recorder.snapshot("baseline")
    (worktree / "f3.txt").write_text(text)
    head = recorder.snapshot("edit")
    assert base is not None and head is not None
    return worktree, recorder, base, head


def _shared(tmp_path: Path) -> str:
    return (tmp_path / "shared").as_uri()


def test_a_machine_that_only_reads_brings_the_change_to_show_it(tmp_path: Path) -> None:
    from kestrel.app_share import bring, checkpointer_for
    from kestrel.settings import Settings

    worktree, recorder, base, head = _on_a_worker(tmp_path, "changed\n")
    shows = Settings(data_dir=tmp_path / "server", workspace_share_url=_shared(tmp_path))
    bring(shows, worktree, SESSION, head.id)
    reader = checkpointer_for(shows, worktree, SESSION).store
    assert reader.head_id() == head.id
    assert reader.diff(base.id, head.id) == recorder.diff(base.id, head.id)
    assert "+changed" in reader.diff(base.id, head.id)


def test_a_server_exports_a_change_recorded_on_another_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kestrel.protocol.events import CheckpointCreated, SessionStarted
    from kestrel.service.change_export import change_patch, session_change
    from kestrel.store.sqlite import SQLiteStore

    worktree, _, base, head = _on_a_worker(tmp_path, "changed on the worker\n")
    store = SQLiteStore(tmp_path / "log.db")
    started = SessionStarted(session_id=SESSION, task="t", cwd=str(worktree), model="m")
    store.append(SESSION, started)
    for mark in (base, head):
        store.append(SESSION, CheckpointCreated(checkpoint_id=mark.id, label=mark.label))

    monkeypatch.setenv("KESTREL_WORKSPACE_SHARE_URL", _shared(tmp_path))
    change = session_change(store, SESSION, tmp_path / "server")  # Nothing of it there.
    assert change.state == "pending"
    assert b"+changed on the worker" in change_patch(change)
