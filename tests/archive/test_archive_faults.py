"""When the object store fails or an object is spoiled: nothing is lost, and the command says
what happened in one line."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from archive_kit import data_of, listed, local_copy, open_log
from cli_kit import Env
from s3_server import BUCKET, S3Server
from small_session import make_session


def _session(env: Env, tmp_path: Path) -> tuple[str, dict[str, str], str]:
    """A session in the environment's data directory: its id, files and exported log."""
    with contextlib.closing(open_log(env)) as store:
        sid = make_session(store, data_of(env), tmp_path / "work")
    exported = env.run("sessions", "export", sid)
    assert exported.returncode == 0, exported.stderr
    return sid, local_copy(data_of(env), sid), exported.stdout


def test_a_failed_upload_loses_nothing_and_says_so(own_s3: S3Server, tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.vars.update(own_s3.env, KESTREL_ARCHIVE_URL=own_s3.url("sessions"))
    sid, files, exported = _session(env, tmp_path)
    own_s3.stop()

    done = env.run("sessions", "archive", "--idle-days", "0")

    assert done.returncode == 1
    line = done.stderr.strip()
    assert line.startswith(
        f"kestrel: session {sid} was not archived, and nothing of it was removed"
    )
    assert f"cannot store s3://{BUCKET}/sessions/{sid}.tar.gz" in line
    assert "\n" not in line
    assert local_copy(data_of(env), sid) == files
    assert env.run("sessions", "export", sid).stdout == exported
    assert listed(env)[sid]["status"] == "done"


@pytest.mark.parametrize("blobs", ["folder", "s3"])
def test_a_spoiled_object_is_refused_and_the_session_stays_archived(
    blobs: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = Env(tmp_path)
    server: S3Server | None = None
    if blobs == "s3":
        server = request.getfixturevalue("s3")
        env.vars.update(server.env, KESTREL_ARCHIVE_URL=server.url(f"spoiled/{tmp_path.name}"))
    sid, files, exported = _session(env, tmp_path)
    archived = env.run("sessions", "archive", sid)
    assert archived.returncode == 0, archived.stderr
    good = _spoil(env, server, sid, b"not the archive")

    opened = env.run("sessions", "export", sid)

    assert opened.returncode == 2 and opened.stdout == ""
    line = opened.stderr.strip()
    assert f"kestrel: session {sid}: its archive " in line and "\n" not in line
    assert "does not match the checksum recorded when it was archived" in line
    assert line.endswith("nothing was restored and it stays archived")
    assert local_copy(data_of(env), sid) == {}
    assert listed(env)[sid]["status"] == "archived"

    _spoil(env, server, sid, good)  # the right bytes back: it opens as it was
    assert env.run("sessions", "export", sid).stdout == exported
    assert local_copy(data_of(env), sid) == files


def _spoil(env: Env, server: S3Server | None, sid: str, data: bytes) -> bytes:
    """Replace the session's object with `data`; what it held."""
    if server is None:
        path = data_of(env) / "archive" / "objects" / f"{sid}.tar.gz"
        old = path.read_bytes()
        path.write_bytes(data)
        return old
    client = server.client()
    key = env.vars["KESTREL_ARCHIVE_URL"].removeprefix(f"s3://{BUCKET}/") + f"/{sid}.tar.gz"
    old = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    client.put_object(Bucket=BUCKET, Key=key, Body=data)
    return bytes(old)


def test_named_sessions_that_are_left_make_the_command_fail(tmp_path: Path) -> None:
    env = Env(tmp_path)
    with contextlib.closing(open_log(env)) as store:
        running = make_session(store, data_of(env), tmp_path / "work", finish=False)

    done = env.run("sessions", "archive", running)

    assert done.returncode == 1
    assert f"  {running}  is running; archive it once it has finished (or with --force)" in (
        done.stdout
    )
    assert listed(env)[running]["status"] == "running"
    restored = env.run("sessions", "restore", running)
    assert restored.stdout.strip() == f"session {running} is not archived"
