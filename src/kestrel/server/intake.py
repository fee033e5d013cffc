"""Turn an untrusted repository source into a local git checkout a session may own.

A request names a remote URL, a folder on the server, or uploads a tarball or git bundle.
`parse_source` and `archive_source` check the request and return a typed source;
`materialize` makes a fresh checkout of it with at least one commit, or raises `IntakeError`
(for the HTTP layer, a 400 with the message as body) and leaves the destination as it was.

The rules, in short: only https (http when allowed), ssh and scp-like URLs, without credentials,
options or remote helpers; local folders only inside the server's allowed roots, and cloned,
never used in place; archives unpacked entry by entry within limits, their `.git` dropped and a
new repository started over the files; bundles verified, then cloned. All git runs through
`kestrel.gitsafe`, with hooks off, no submodules and one transport enabled per clone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from kestrel.server.intake_archive import empty_folder, extract_tar
from kestrel.server.intake_git import clone_bundle, clone_local, clone_url, commit_upload
from kestrel.server.intake_sources import (
    ARCHIVE_KINDS,
    Archive,
    ArchiveKind,
    GitUrl,
    IntakeError,
    IntakeLimits,
    LocalPath,
    RepositorySource,
    check_ref,
    url_scheme,
)

__all__ = [
    "Archive",
    "ArchiveKind",
    "GitUrl",
    "IntakeError",
    "IntakeLimits",
    "LocalPath",
    "RepositorySource",
    "archive_source",
    "check_ref",
    "materialize",
    "parse_source",
    "url_scheme",
]

_URL_FIELDS = frozenset({"git_url", "ref"})
_PATH_FIELDS = frozenset({"path"})


def parse_source(data: Mapping[str, object]) -> RepositorySource:
    """The source a JSON request body names: `{"git_url": ..., "ref": ...}` or `{"path": ...}`.

    Unknown fields are refused rather than ignored, so a misspelt `"branch"` cannot quietly
    clone the default branch instead.
    """
    if not isinstance(data, Mapping):
        raise IntakeError("the repository source must be a JSON object")
    keys = set(data)
    if "git_url" in keys and "path" in keys:
        raise IntakeError("give either git_url or path, not both")
    if "git_url" in keys:
        _only(keys, _URL_FIELDS)
        ref = data.get("ref")
        if ref is not None and not isinstance(ref, str):
            raise IntakeError("ref must be a string")
        url = data["git_url"]
        if not isinstance(url, str):
            raise IntakeError("git_url must be a string")
        return GitUrl(url, ref)
    if "path" in keys:
        _only(keys, _PATH_FIELDS)
        path = data["path"]
        if not isinstance(path, str):
            raise IntakeError("path must be a string")
        return LocalPath(path)
    raise IntakeError("name a repository: give git_url (and optionally ref) or path")


def _only(keys: set[str], allowed: frozenset[str]) -> None:
    extra = sorted(keys - allowed)
    if extra:
        shown = ", ".join(repr(key) for key in extra)
        raise IntakeError(f"unknown field {shown}; expected only {', '.join(sorted(allowed))}")


def archive_source(data: bytes | Path, kind: str) -> Archive:
    """An uploaded archive of `kind` ("tar", "tar.gz" or "bundle"), as bytes or a saved file."""
    for known in ARCHIVE_KINDS:
        if kind == known:
            return Archive(data, known)
    raise IntakeError(f"archive kind must be one of {', '.join(ARCHIVE_KINDS)}")


def materialize(
    source: RepositorySource,
    dest: Path,
    *,
    allowed_roots: Sequence[Path] = (),
    limits: IntakeLimits = IntakeLimits(),  # noqa: B008 - frozen, so one shared default is safe
    allow_http: bool = False,
) -> Path:
    """Make a checkout of `source` in `dest` (absent or empty) and return its folder.

    On any failure `dest` is put back as it was: removed if this call made it, else emptied.
    Raises `IntakeError` for anything the user can fix; `FileExistsError` when `dest` holds
    files, which is the caller's mistake.
    """
    dest = Path(os.path.abspath(dest))
    made = _prepare(dest)
    try:
        _fill(source, dest, allowed_roots, limits, allow_http)
    except BaseException:
        if made:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            empty_folder(dest)
        raise
    return dest


def _prepare(dest: Path) -> bool:
    """Make `dest` if absent; whether this call made it."""
    if dest.is_symlink():
        raise FileExistsError(f"{dest} is a symbolic link, not a folder for a checkout")
    if dest.is_dir():
        if any(dest.iterdir()):
            raise FileExistsError(f"{dest} is not empty")
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.mkdir()
    return True


def _fill(
    source: RepositorySource,
    dest: Path,
    roots: Sequence[Path],
    limits: IntakeLimits,
    allow_http: bool,
) -> None:
    if isinstance(source, GitUrl):
        if source.scheme == "http" and not allow_http:
            raise IntakeError("plain http:// git URLs are turned off on this server; use https://")
        clone_url(source, dest, limits)
    elif isinstance(source, LocalPath):
        clone_local(source.path, dest, roots, limits)
    elif source.kind == "bundle":
        clone_bundle(source.data, dest, limits)
    else:
        extract_tar(source.data, source.kind == "tar.gz", dest, limits)
        commit_upload(dest, limits)
