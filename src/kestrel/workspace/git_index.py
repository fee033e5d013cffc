"""Read a git index file (versions 2 to 4) and write a plain version-2 one: pure functions.

Only what a checkpoint's private index may borrow from a checkout's index is kept: stage-0
entries of files and symlinks with their stat data and blob ids. Everything that could make git
skip looking at a file or trust data it did not compute is dropped: extensions (cached trees,
untracked cache, fsmonitor, split and sparse index, ...), and entries marked assume-unchanged,
skip-worktree or intent-to-add. The cached trees' ids are returned apart, as a hint of which
tree objects the checkout already has.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

_SIGNATURE = b"DIRC"
_STAT = struct.Struct(">10I")  # ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size
_OID = 20
_CHECKSUM = 20
_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_STAGE = 0x3000
_NAME_MASK = 0x0FFF
_SKIP_WORKTREE = 0x4000
_INTENT_TO_ADD = 0x2000
_KEPT_MODES = {0o100644, 0o100755, 0o120000}
_MAX_ENTRIES = 10_000_000


class IndexUnusable(ValueError):
    """The index file cannot be read as a SHA-1 git index this module trusts; says why."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stage-0 file or symlink entry: raw stat words, blob id and path as git stored them."""

    stat: tuple[int, ...]
    oid: bytes
    path: bytes

    @property
    def mode(self) -> int:
        """The entry's git mode (0o100644, 0o100755 or 0o120000)."""
        return self.stat[6]


@dataclass(frozen=True, slots=True)
class ParsedIndex:
    """The entries worth keeping, how many were left out, and the cached trees' ids."""

    entries: tuple[IndexEntry, ...]
    dropped: int
    tree_oids: tuple[bytes, ...]


def parse_index(data: bytes) -> ParsedIndex:
    """Parse an index file's bytes; raises `IndexUnusable` for anything unexpected."""
    if len(data) < 12 + _CHECKSUM or data[:4] != _SIGNATURE:
        raise IndexUnusable("not a git index file")
    body, trailer = data[:-_CHECKSUM], data[-_CHECKSUM:]
    # An all-zero trailer is what git writes with index.skipHash; anything else must match.
    if trailer != bytes(_CHECKSUM) and _sha1(body) != trailer:
        raise IndexUnusable("the index checksum does not match (damaged, or not SHA-1)")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4) or count > _MAX_ENTRIES:
        raise IndexUnusable(f"unsupported index version {version}")
    reader = _Reader(body, version)
    kept: list[IndexEntry] = []
    dropped = 0
    previous = b""
    for _ in range(count):
        entry, keep = reader.entry()
        # Sorted by path (the stages of one conflicted path share it); a kept path is unique.
        if entry.path < previous or (keep and kept and kept[-1].path == entry.path):
            raise IndexUnusable("index entries are out of order")
        previous = entry.path
        if keep:
            kept.append(entry)
        else:
            dropped += 1
    return ParsedIndex(tuple(kept), dropped, _tree_oids(body, reader.offset))


def write_index(entries: tuple[IndexEntry, ...]) -> bytes:
    """A version-2 index file holding exactly `entries` (sorted by path), with no extensions."""
    parts = [_SIGNATURE, struct.pack(">II", 2, len(entries))]
    for entry in entries:
        flags = min(len(entry.path), _NAME_MASK)
        record = _STAT.pack(*entry.stat) + entry.oid + struct.pack(">H", flags) + entry.path
        # Each entry is NUL-padded (at least one NUL) to a multiple of eight bytes.
        parts.append(record + b"\0" * (8 - len(record) % 8))
    body = b"".join(parts)
    return body + _sha1(body)


def _sha1(data: bytes) -> bytes:
    """The index's trailing checksum (an integrity check, not a security one)."""
    return hashlib.sha1(data, usedforsecurity=False).digest()


def usable_path(path: bytes) -> bool:
    """Whether git would accept `path` in a tree: relative, no empty, `.`, `..` or `.git` part."""
    if not path or path.startswith(b"/") or path.endswith(b"/") or b"\0" in path:
        return False
    return all(part.lower() not in (b"", b".", b"..", b".git") for part in path.split(b"/"))


class _Reader:
    """Walks the entries of an index body, keeping the previous path for version 4."""

    def __init__(self, body: bytes, version: int) -> None:
        self._body = body
        self._version = version
        self.offset = 12
        self._previous = b""

    def entry(self) -> tuple[IndexEntry, bool]:
        """The next entry, and whether a checkpoint's index may keep it."""
        body, start = self._body, self.offset
        fixed = _STAT.size + _OID + 2
        if start + fixed > len(body):
            raise IndexUnusable("the index ends inside an entry")
        stat = _STAT.unpack_from(body, start)
        oid = body[start + _STAT.size : start + _STAT.size + _OID]
        (flags,) = struct.unpack_from(">H", body, start + fixed - 2)
        cursor = start + fixed
        extended = 0
        if flags & _EXTENDED:
            if self._version < 3 or cursor + 2 > len(body):
                raise IndexUnusable("an extended entry in a version-2 index")
            (extended,) = struct.unpack_from(">H", body, cursor)
            cursor += 2
        path, cursor = self._path(cursor, flags & _NAME_MASK)
        if self._version < 4:
            cursor = start + ((cursor - start) // 8 + 1) * 8  # the NUL padding
            if cursor > len(body):
                raise IndexUnusable("the index ends inside an entry")
        self.offset = cursor
        if not usable_path(path):
            raise IndexUnusable(f"the index names an unsafe path {path!r}")
        unusual = flags & (_ASSUME_VALID | _STAGE) or extended & (_SKIP_WORKTREE | _INTENT_TO_ADD)
        keep = not unusual and stat[6] in _KEPT_MODES
        return IndexEntry(stat, oid, path), keep

    def _path(self, cursor: int, length: int) -> tuple[bytes, int]:
        body = self._body
        if self._version == 4:
            strip, cursor = _varint(body, cursor)
            end = body.find(b"\0", cursor)
            if end < 0 or strip > len(self._previous):
                raise IndexUnusable("a damaged path in a version-4 index")
            path = self._previous[: len(self._previous) - strip] + body[cursor:end]
            self._previous = path
            return path, end + 1
        end = body.find(b"\0", cursor) if length == _NAME_MASK else cursor + length
        if end < 0 or end >= len(body) or body[end] != 0:
            raise IndexUnusable("a damaged path in the index")
        return body[cursor:end], end


def _varint(data: bytes, cursor: int) -> tuple[int, int]:
    """Git's offset varint (as in version-4 paths): the value and the cursor after it."""
    if cursor >= len(data):
        raise IndexUnusable("the index ends inside a number")
    byte = data[cursor]
    value = byte & 0x7F
    cursor += 1
    while byte & 0x80:
        if cursor >= len(data) or value > 1 << 32:
            raise IndexUnusable("a damaged number in a version-4 index")
        byte = data[cursor]
        value = ((value + 1) << 7) | (byte & 0x7F)
        cursor += 1
    return value, cursor


def _tree_oids(body: bytes, offset: int) -> tuple[bytes, ...]:
    """The ids of the valid trees in the cached-tree (`TREE`) extension, if it has one."""
    trees: tuple[bytes, ...] = ()
    while offset + 8 <= len(body):
        name = body[offset : offset + 4]
        (size,) = struct.unpack_from(">I", body, offset + 4)
        payload = body[offset + 8 : offset + 8 + size]
        if len(payload) != size:
            raise IndexUnusable("the index ends inside an extension")
        if name == b"link":
            # A split index holds only the changes to a shared index kept elsewhere.
            raise IndexUnusable("a split index")
        offset += 8 + size
        if name == b"TREE":
            trees = _cached_trees(payload)
    return trees


def _cached_trees(payload: bytes) -> tuple[bytes, ...]:
    """Each record: path NUL, entry count, space, subtree count, newline, id when count >= 0."""
    found: list[bytes] = []
    cursor = 0
    while cursor < len(payload):
        nul = payload.find(b"\0", cursor)
        newline = payload.find(b"\n", nul + 1) if nul >= 0 else -1
        if newline < 0:
            raise IndexUnusable("a damaged cached tree in the index")
        counts = payload[nul + 1 : newline].split(b" ")
        try:
            entries = int(counts[0])
        except (ValueError, IndexError) as error:
            raise IndexUnusable("a damaged cached tree in the index") from error
        cursor = newline + 1
        if entries >= 0:
            found.append(payload[cursor : cursor + _OID])
            cursor += _OID
    return tuple(oid for oid in found if len(oid) == _OID)
