"""Real git and hand-made tarballs for the intake tests."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

from kestrel.server.intake import IntakeLimits, archive_source, materialize

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
Member = tuple[tarfile.TarInfo, bytes | None]


def plain(cwd: Path, *args: str) -> str:
    """git as a user would run it (global and system config kept out of the test)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), **IDENTITY}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    plain(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    plain(path, "add", "a.txt")
    plain(path, "commit", "-qm", "first")
    plain(path, "checkout", "-qb", "dev")
    (path / "b.txt").write_text("b\n")
    plain(path, "add", "b.txt")
    plain(path, "commit", "-qm", "second")
    plain(path, "checkout", "-q", "main")
    return path


def head(repo: Path, rev: str = "HEAD") -> str:
    return plain(repo, "rev-parse", rev).strip()


def regular(name: str, data: bytes = b"x\n", mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def entry(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, 0o755
    return info, None


def tarball(*members: Member, gz: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return buffer.getvalue()


def unpack(dest: Path, data: bytes, kind: str = "tar", **limits: int) -> Path:
    return materialize(archive_source(data, kind), dest, limits=IntakeLimits(**limits))
