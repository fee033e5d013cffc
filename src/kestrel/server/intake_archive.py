"""Unpack an untrusted tarball into a fresh folder, one entry at a time, and nothing else.

Only regular files, directories and relative symbolic links whose target stays in the tree are
written. Everything is refused before a byte of it lands: absolute names, `..`, hard links,
devices, FIFOs, sparse files, duplicates, and anything past the limits. Bytes are counted as
they come out of the decompressor, headers included, so a gzip bomb stops at the limit whatever
its headers claim. Any `.git` in the upload is dropped (its config and hooks could make git run
a program), and the caller starts a new repository over the files.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import shutil
import stat
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO, Protocol

from kestrel.server.intake_sources import IntakeError, IntakeLimits

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_HEADER_BUDGET = 1 << 20
"""Bytes tarfile may read between two members (padding, pax and long-name headers); tarfile
holds a header in memory whole, so this is what one hostile header can cost."""

_COPY_CHUNK = 1 << 16
_USER_FAULTS = (errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL)


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class _Meter(io.RawIOBase):
    """A reader that refuses to hand out more than its limit, and counts header bytes apart."""

    def __init__(self, inner: _Reader, limit: int, too_much: str) -> None:
        super().__init__()
        self._inner = inner
        self._limit = limit
        self._too_much = too_much
        self.total = 0
        self.loose = 0
        self.in_data = False

    def readable(self) -> bool:
        """Always: this is a reader."""
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Fill `buffer` from the inner reader, raising once the limit is passed."""
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._limit - self.total + 1)
        chunk = self._inner.read(want)
        self.total += len(chunk)
        if self.total > self._limit:
            raise IntakeError(self._too_much)
        if not self.in_data:
            self.loose += len(chunk)
            if self.loose > _HEADER_BUDGET:
                raise IntakeError("the archive holds a header larger than 1 MiB; refused")
        view[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        """Close the inner reader too: it may be the uploaded file."""
        self._inner.close()
        super().close()


def extract_tar(upload: bytes | Path, gzipped: bool, dest: Path, limits: IntakeLimits) -> None:
    """Write the tarball's files into the empty folder `dest`; `IntakeError` on anything unsafe."""
    with _open_upload(upload, limits) as raw:
        compressed = raw.peek(2)[:2] == b"\x1f\x8b"
        if gzipped != compressed:
            hint = "tar.gz" if compressed else "tar"
            raise IntakeError(
                f"the upload is {'' if compressed else 'not '}gzip-compressed; "
                f"send it with kind '{hint}'"
            )
        stream: _Reader = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        meter = _Meter(
            stream,
            limits.max_total_bytes,
            f"the archive unpacks to more than {limits.max_total_bytes} bytes; refused",
        )
        try:
            with tarfile.open(fileobj=io.BufferedReader(meter), mode="r|") as tar:
                _unpack(tar, meter, dest, limits)
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
            raise IntakeError(f"the archive is not a readable tarball: {error}") from error
    check_links(dest)


def _open_upload(upload: bytes | Path, limits: IntakeLimits) -> io.BufferedReader:
    """The upload as a buffered reader, refused when larger than the archive limit."""
    if isinstance(upload, bytes):
        size = len(upload)
        raw: BinaryIO = io.BytesIO(upload)
    else:
        try:
            raw = upload.open("rb")
        except OSError as error:
            raise IntakeError(f"the uploaded archive cannot be read: {error.strerror}") from error
        size = os.fstat(raw.fileno()).st_size
    if size > limits.max_archive_bytes:
        raw.close()
        raise IntakeError(f"the archive is larger than {limits.max_archive_bytes} bytes; refused")
    capped = _Meter(raw, limits.max_archive_bytes, "the archive grew past its size limit")
    capped.in_data = True
    return io.BufferedReader(capped)


def _unpack(tar: tarfile.TarFile, meter: _Meter, dest: Path, limits: IntakeLimits) -> None:
    entries = 0
    for member in tar:
        entries += 1
        meter.loose = 0
        if entries > limits.max_entries:
            raise IntakeError(f"the archive holds more than {limits.max_entries} entries")
        parts = _parts(member.name)
        if any(part.lower() == ".git" for part in parts):
            _drain(tar, member, meter)  # read, not skipped: skipping would count as header
            continue
        if not parts:
            if member.isdir():
                continue
            raise IntakeError(f"archive entry {member.name!r} has no name")
        try:
            _write(tar, member, parts, meter, dest, limits)
        except OSError as error:
            if error.errno not in _USER_FAULTS:
                raise
            raise IntakeError(
                f"archive entry {member.name!r} cannot be written: {error.strerror}"
            ) from error


def _parts(name: str) -> tuple[str, ...]:
    """The entry's path components with `.` dropped; `IntakeError` for absolute or `..`."""
    if "\0" in name:
        raise IntakeError("an archive entry's name contains a NUL byte")
    if name.startswith("/"):
        raise IntakeError(f"archive entry {name!r} has an absolute path; only relative ones")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise IntakeError(f"archive entry {name!r} climbs out of the archive with '..'")
    return parts


def _write(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    parts: tuple[str, ...],
    meter: _Meter,
    dest: Path,
    limits: IntakeLimits,
) -> None:
    _refuse_kind(member, limits)
    target = _real_parent(dest, parts, member.name) / parts[-1]
    if member.isdir():
        if not os.path.lexists(target):
            target.mkdir(mode=0o755)
        elif not stat.S_ISDIR(os.lstat(target).st_mode):
            raise IntakeError(f"archive entry {member.name!r} appears twice, not always a folder")
    elif member.issym():
        _symlink(member, parts, target)
    else:
        _file(tar, member, target, meter)


def _refuse_kind(member: tarfile.TarInfo, limits: IntakeLimits) -> None:
    """Everything but folders, symbolic links and plain files within the size limit."""
    name = member.name
    if member.islnk():
        raise IntakeError(
            f"archive entry {name!r} is a hard link, which is refused; "
            "create the archive with `tar --hard-dereference`"
        )
    if member.issparse():
        raise IntakeError(f"archive entry {name!r} is a sparse file, which is refused")
    if not (member.isdir() or member.issym() or member.isreg()):
        raise IntakeError(
            f"archive entry {name!r} is a device, FIFO or other special file, which is refused"
        )
    if member.isreg() and member.size > limits.max_file_bytes:
        raise IntakeError(f"archive entry {name!r} is larger than {limits.max_file_bytes} bytes")


def _real_parent(dest: Path, parts: tuple[str, ...], name: str) -> Path:
    """The entry's folder, made as needed; never reached through a link, so no write escapes."""
    here = dest
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            here.mkdir(mode=0o755)
            continue
        if stat.S_ISLNK(mode):
            raise IntakeError(f"archive entry {name!r} lies under a symbolic link; refused")
        if not stat.S_ISDIR(mode):
            raise IntakeError(f"archive entry {name!r} lies under a file; refused")
    return here


def _symlink(member: tarfile.TarInfo, parts: tuple[str, ...], target: Path) -> None:
    link = member.linkname
    if not link or "\0" in link or link.startswith("/"):
        raise IntakeError(
            f"archive entry {member.name!r} is a symbolic link with an absolute or empty "
            "target; only relative links inside the archive are accepted"
        )
    inside = _inside(PurePosixPath(*parts[:-1], link))
    if inside is None or (inside and inside[0].lower() == ".git"):
        raise IntakeError(
            f"archive entry {member.name!r} is a symbolic link pointing outside the archive"
        )
    if os.path.lexists(target):
        raise IntakeError(f"archive entry {member.name!r} appears twice")
    os.symlink(link, target)


def _inside(path: PurePosixPath) -> tuple[str, ...] | None:
    """`path` with `..` folded away lexically, or None when it climbs above the top."""
    kept: list[str] = []
    for part in path.parts:
        if part == "..":
            if not kept:
                return None
            kept.pop()
        elif part not in ("", "."):
            kept.append(part)
    return tuple(kept)


def _file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, meter: _Meter) -> None:
    mode = 0o755 if member.mode & 0o111 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(target, flags, mode)
    except FileExistsError as error:
        raise IntakeError(f"archive entry {member.name!r} appears twice") from error
    with os.fdopen(fd, "wb") as out:
        _copy(tar, member, meter, out)


def _drain(tar: tarfile.TarFile, member: tarfile.TarInfo, meter: _Meter) -> None:
    if member.isreg():
        _copy(tar, member, meter, None)


def _copy(
    tar: tarfile.TarFile, member: tarfile.TarInfo, meter: _Meter, out: BinaryIO | None
) -> None:
    source = tar.extractfile(member)
    if source is None:
        return
    meter.in_data = True
    try:
        while chunk := source.read(_COPY_CHUNK):
            if out is not None:
                out.write(chunk)
    finally:
        meter.in_data = False


def check_links(root: Path) -> None:
    """Refuse a tree where a symbolic link resolves outside `root` or into its `.git`.

    Each link was checked by its text alone; this catches a link whose path runs through
    another link (`a -> .`, then `a/b -> ../x`), which only the finished tree can show.
    """
    top = Path(os.path.realpath(root))
    for folder, dirs, files in os.walk(top):
        if Path(folder) == top and ".git" in dirs:
            dirs.remove(".git")  # git's own folder, made by intake, holds no links
        for name in (*dirs, *files):
            path = Path(folder, name)
            if not path.is_symlink():
                continue
            resolved = Path(os.path.realpath(path))
            relative = resolved.relative_to(top).parts if resolved.is_relative_to(top) else None
            if relative is None or (relative and relative[0].lower() == ".git"):
                shown = path.relative_to(top).as_posix()
                raise IntakeError(
                    f"{shown!r} is a symbolic link pointing outside the repository; only links "
                    "that stay inside it (and out of .git) are accepted"
                )


def empty_folder(path: Path) -> None:
    """Remove everything inside `path`, keeping the folder; links are removed, not followed."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
