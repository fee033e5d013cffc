"""Pack a local git repository for `kestrel sessions create --upload`: its files as they are
now, committed or not, without ignored files and without `.git`, as a gzipped tarball."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from kestrel.cli.exit_codes import EXIT_USAGE
from kestrel.cli.remote_client import RemoteError


def repository_files(folder: Path) -> list[str]:
    """The files git sees under `folder`: tracked ones and new ones it does not ignore."""
    if not folder.is_dir():
        raise RemoteError(f"--upload {folder}: no such folder", EXIT_USAGE)
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=folder,
            capture_output=True,
            check=False,
            timeout=120,
        )
    except FileNotFoundError:
        raise RemoteError("--upload needs git, and git is not installed here", EXIT_USAGE) from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"git took too long to list the files of {folder}") from None
    if done.returncode != 0:
        raise RemoteError(
            f"--upload {folder}: not a git repository (it packs what `git ls-files` lists); "
            "run `git init` there first, or give --git-url or --path",
            EXIT_USAGE,
        )
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return sorted({name for name in names if name})


def pack(folder: Path) -> bytes:
    """The repository's files as a gzipped tarball, owners and groups left out."""
    names = repository_files(folder)
    buffer = io.BytesIO()
    packed = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in names:
            path = folder / name
            if not (path.is_symlink() or path.is_file()):
                continue  # Deleted since it was committed, or a submodule's folder.
            try:
                tar.add(path, arcname=name, recursive=False, filter=_anonymous)
            except OSError as exc:
                raise RemoteError(
                    f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE
                ) from None
            packed += 1
    if not packed:
        raise RemoteError(f"--upload {folder}: the repository has no files to send", EXIT_USAGE)
    return buffer.getvalue()


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
