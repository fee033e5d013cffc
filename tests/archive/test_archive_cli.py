"""`kestrel sessions archive`: 100 sessions to cold storage, one restored on open, exactly as
before, in a local folder and in an S3-compatible store, over SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from archive_kit import (
    checkpoint_ids,
    clone,
    data_of,
    listed,
    local_copy,
    open_log,
    run_session,
    views,
)
from cli_kit import Env

from kestrel.store.tombstones import ArchiveLog

CASES = [("sqlite", "folder"), ("sqlite", "s3"), ("postgres", "s3")]


@pytest.mark.parametrize(("log", "blobs"), CASES)
def test_archive_100_sessions_then_open_one_as_it_was(
    log: str, blobs: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = Env(tmp_path)
    with contextlib.ExitStack() as stack:
        if log == "postgres":
            from pg_helpers import fresh_database

            env.vars["KESTREL_STORE_URL"] = stack.enter_context(fresh_database())
        if blobs == "s3":
            server = request.getfixturevalue("s3")
            env.vars.update(server.env, KESTREL_ARCHIVE_URL=server.url(f"{log}/{tmp_path.name}"))
        store = stack.enter_context(contextlib.closing(open_log(env)))
        _archive_and_reopen(env, store)


def _archive_and_reopen(env: Env, store: ArchiveLog) -> None:
    data = data_of(env)
    sid = run_session(env)  # applied: no overlay left, checkpoints and artifacts
    clones = [clone(store, data, sid) for _ in range(99)]
    first, second = checkpoint_ids(env, sid)[:2]
    assert env.run("rewind", sid, first, "-p").returncode == 0  # a change waits in its overlay
    twin = clone(store, data, sid)
    before, files = views(env, sid), local_copy(data, sid)
    copied = local_copy(data, clones[42])
    assert "D NOTES.md" in before["diff"] and any(k.endswith("/upper/NOTES.md") for k in files)

    idle = env.run("sessions", "archive", "--idle-days", "0")
    assert idle.returncode == 0, idle.stderr
    assert "archived 99 sessions to " in idle.stdout
    for waiting in (sid, twin):
        assert f"  {waiting}  has a change not applied yet (kestrel diff {waiting})" in idle.stdout
    forced = env.run("sessions", "archive", "--force", sid)
    assert forced.returncode == 0, forced.stderr
    assert "archived 1 session to " in forced.stdout

    statuses = {k: v["status"] for k, v in listed(env).items()}
    assert sorted(k for k, s in statuses.items() if s == "archived") == sorted([sid, *clones])
    assert statuses[twin] != "archived"
    assert local_copy(data, sid) == {}  # nothing of it left here
    assert not (data / "overlays" / sid).exists() and not (data / "artifacts" / sid).exists()

    assert views(env, sid) == before  # `kestrel diff`, the first to open it, restored it
    assert local_copy(data, sid) == files

    for who in (sid, twin):  # a rewind of the restored session does what one of its twin does
        done = env.run("rewind", who, second, "-p")
        assert done.returncode == 0, done.stderr
    after = env.run("diff", sid).stdout
    assert after == env.run("diff", twin).stdout
    assert "D NOTES.md" in after and "calc.py" not in after  # back to after the first edit

    shown = env.run("sessions", "show", clones[42])
    assert shown.returncode == 0, shown.stderr
    assert "Fixed: add now adds." in shown.stdout
    assert listed(env)[clones[42]]["status"] == "done"
    assert local_copy(data, clones[42]) == copied
