"""Which host paths the sandbox never shows: secrets, service sockets, files only root may read.

`check_view_path` judges a path the settings want to add to the sandbox's view; `etc_masks`
lists what of /etc must be covered, from a scan cached per process and redone when a folder of
/etc changes.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HOME_SECRETS: tuple[str, ...] = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
)
"""Paths under a home directory that are hidden wherever that home is visible (a workspace)."""

SECRET_SUFFIXES: tuple[str, ...] = (".pem", ".key", ".p12", ".pfx")
"""File name endings of keys and certificates that a settings path may not name."""

USR_LINKS: tuple[str, ...] = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level directories that are symlinks into /usr on a merged-/usr system, else ro-binds."""

HOME_ROOTS: tuple[str, ...] = ("/root", "/home")
"""Where homes live: a settings path may not be a home, or hold one."""

FORBIDDEN_ROOTS: tuple[str, ...] = ("/proc", "/sys", "/dev", "/run", "/var/run", "/boot")
"""Host trees a settings path may not reach into: kernel state, service sockets, boot files."""

SYSTEM_READ_ONLY: tuple[str, ...] = ("/usr", "/etc", *USR_LINKS)
"""Host trees a settings path may not make writable."""

MaskKind = Literal["dir", "file"]


class ViewError(ValueError):
    """A path the settings add to the sandbox's view is refused; the message says why."""


def check_view_path(
    path: Path, *, home: Path | None, writable: bool, data: Path | None = None
) -> Path:
    """`path` resolved, if the sandbox may show it (read-write if `writable`); else ViewError."""
    given = path.expanduser()
    if not given.is_absolute():
        raise ViewError(f"{path}: give an absolute path (or one starting with ~/)")
    place = Path(os.path.realpath(given))
    if place == Path("/"):
        raise ViewError(f"{path}: the whole filesystem cannot be shown; name the folders needed")
    for root in FORBIDDEN_ROOTS:
        if place.is_relative_to(root):
            raise ViewError(f"{path}: {root} holds kernel state or host services' sockets")
    homes = [Path(h) for h in HOME_ROOTS] + ([home] if home is not None else [])
    for folder in homes:
        if folder.is_relative_to(place) or place.parent == Path("/home"):
            raise ViewError(f"{path} is or holds a home directory; name the folders needed in it")
    _check_secret(path, place, home)
    if data is not None:
        data = Path(os.path.realpath(data))
        if data.is_relative_to(place) or place.is_relative_to(data):
            raise ViewError(f"{path}: Kestrel's data directory ({data}) stays hidden")
    if writable:
        for root in SYSTEM_READ_ONLY:
            if place.is_relative_to(root) or Path(root).is_relative_to(place):
                raise ViewError(f"{path}: {root} stays read-only")
    return place


def _check_secret(path: Path, place: Path, home: Path | None) -> None:
    parts = place.parts
    for secret in HOME_SECRETS:
        names = tuple(Path(secret).parts)
        if any(parts[i : i + len(names)] == names for i in range(len(parts))):
            raise ViewError(f"{path}: {secret} holds credentials and stays hidden")
        if home is not None and (home / secret).is_relative_to(place):
            raise ViewError(f"{path} holds {home / secret}, which stays hidden")
    if place.name.endswith(SECRET_SUFFIXES) or place.name.startswith("id_"):
        raise ViewError(f"{path}: keys and certificates stay hidden")


@dataclass(frozen=True, slots=True)
class _EtcScan:
    stamps: tuple[tuple[str, int], ...]
    masks: tuple[tuple[str, MaskKind], ...]


_ETC_SCANS: dict[str, _EtcScan] = {}


def etc_masks(root: str = "/etc") -> tuple[tuple[str, MaskKind], ...]:
    """What under `root` others may not read (or, for folders, list and enter), and sockets.

    The scan is kept for the process; it is redone when a folder under `root` has changed
    (a file added, removed or renamed, a folder's mode changed), which a stat of each folder
    tells cheaply.
    """
    scan = _ETC_SCANS.get(root)
    if scan is None or not _fresh(scan):
        scan = _scan(root)
        _ETC_SCANS[root] = scan
    return scan.masks


def _fresh(scan: _EtcScan) -> bool:
    try:
        return all(os.stat(folder).st_ctime_ns == stamp for folder, stamp in scan.stamps)
    except OSError:
        return False


def _scan(root: str) -> _EtcScan:
    stamps: list[tuple[str, int]] = []
    masks: list[tuple[str, MaskKind]] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            stamps.append((folder, os.stat(folder).st_ctime_ns))
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:
                    masks.append((entry.path, "dir"))
                else:
                    pending.append(entry.path)
            elif stat.S_ISSOCK(mode) or (not stat.S_ISLNK(mode) and not mode & stat.S_IROTH):
                masks.append((entry.path, "file"))
    return _EtcScan(tuple(stamps), tuple(sorted(masks)))
