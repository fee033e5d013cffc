"""A session's own folders in the data directory: its overlay layer and its artifacts.

The layer (`overlays/<session>`) holds what the session wrote and deleted (the kernel overlay's
upper layer, with its whiteouts, character devices 0/0, and its opaque folders, marked by the
`user.overlay.opaque` attribute) or the copy it works on, and the apply journal. Its scratch
folder and the mount point of the real checkout are left out: mounting the overlay makes them
again. Extended attributes in the `user.` namespace are kept beside the files, since tar
archives made by Python's `tarfile` do not carry them.
"""

from __future__ import annotations

import base64
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from kestrel.archive.errors import ArchiveDamaged
from kestrel.workspace.overlay import layer_for

ARTIFACTS = "artifacts"
"""Where a session's artifacts are (tool outputs, written files): `<data>/artifacts/<session>`."""
DATA = "data"
"""The folder of an archive that mirrors the data directory."""
_LEFT_OUT = ("work", "lower", "tree.partial")
"""Parts of a layer that are made again when it is used (an interrupted copy is made anew)."""

Xattrs = dict[str, dict[str, str]]
"""Extended attributes per path (relative to the data directory): name to base64 value."""


def folders_of(data_dir: Path, session_id: str) -> list[str]:
    """The session's folders that exist, relative to the data directory."""
    layer = layer_for(data_dir, session_id).root
    candidates = (layer, data_dir / ARTIFACTS / session_id)
    return [p.relative_to(data_dir).as_posix() for p in candidates if p.is_dir()]


def allowed_folders(session_id: str) -> set[str]:
    """Every folder an archive of the session may hold, relative to the data directory."""
    layer = layer_for(Path(), session_id).root
    return {layer.as_posix(), f"{ARTIFACTS}/{session_id}"}


def add_folders(tar: tarfile.TarFile, data_dir: Path, folders: list[str]) -> None:
    """Add each folder, under `data/`, without the layer's scratch parts."""
    for folder in folders:
        tar.add(data_dir / folder, arcname=f"{DATA}/{folder}", filter=_skip_scratch(folder))


def _skip_scratch(folder: str) -> Callable[[tarfile.TarInfo], tarfile.TarInfo | None]:
    left_out = {f"{DATA}/{folder}/{name}" for name in _LEFT_OUT}

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if any(info.name == p or info.name.startswith(p + "/") for p in left_out):
            return None
        return info

    return keep


def xattrs_of(data_dir: Path, folders: list[str]) -> Xattrs:
    """The `user.` extended attributes of every folder and file under `folders`."""
    found: Xattrs = {}
    for folder in folders:
        for top, dirs, files in os.walk(data_dir / folder):
            if Path(top) == data_dir / folder:
                dirs[:] = [d for d in dirs if d not in _LEFT_OUT]
            for name in (".", *dirs, *files):
                path = os.path.normpath(os.path.join(top, name))
                if os.path.islink(path):
                    continue
                names = [n for n in _listxattr(path) if n.startswith("user.")]
                if names:
                    rel = Path(path).relative_to(data_dir).as_posix()
                    found[rel] = {n: _b64(os.getxattr(path, n)) for n in names}
    return found


def remove(data_dir: Path, folders: list[str]) -> None:
    """Delete the session's folders."""
    for folder in folders:
        shutil.rmtree(data_dir / folder, ignore_errors=True)


def put_back(data_dir: Path, staging: Path, folders: list[str], xattrs: Xattrs) -> None:
    """Move each folder from `staging/data/` into place, replacing what is there (only a cut-
    short archive leaves anything, and the archive's copy is the one the log matches)."""
    for folder in folders:
        source, target = staging / DATA / folder, data_dir / folder
        if not source.is_dir():
            raise ArchiveDamaged(f"the archive lists {folder} but does not hold it")
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    for rel, attributes in xattrs.items():
        for name, value in attributes.items():
            os.setxattr(data_dir / rel, name, base64.b64decode(value), follow_symlinks=False)


def _listxattr(path: str) -> list[str]:
    try:
        return os.listxattr(path, follow_symlinks=False)
    except OSError:  # a file system without extended attributes
        return []


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")
