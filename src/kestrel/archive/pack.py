"""One archived session as one object: a gzip-compressed tar with a manifest.

    manifest.json            what the object holds (below), first
    events.jsonl             the session's event rows as the log stored them, one per line
    checkpoints/<repo>.bundle, <repo>.index
                             the session's checkpoints in each shadow repository
    data/overlays/<session>/…, data/artifacts/<session>/…
                             its folders, as they lie in the data directory

The manifest names the session, its status and last event number, how many rows the events
file holds and their SHA-256, the folders, their extended attributes and the repositories.
The SHA-256 of the whole object is kept in the tombstone, so an object is checked before any
of it is read. Reading also refuses any member outside the places above, or reached through a
link, whatever the checksum says.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from kestrel.archive import checkpoints, files
from kestrel.archive.checkpoints import RepoPart
from kestrel.archive.errors import ArchiveDamaged
from kestrel.store.tombstones import StoredRow

FORMAT = 1
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
_CHECKPOINTS = "checkpoints"
_REPO = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What an archived session's object holds."""

    format: int = FORMAT
    session_id: str
    archived_at: float
    status: str
    last_seq: int
    rows: int
    events_sha256: str
    folders: list[str] = field(default_factory=list)
    xattrs: files.Xattrs = field(default_factory=dict)
    checkpoints: list[RepoPart] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """What is packed: the session's rows and where its other data lies."""

    session_id: str
    status: str
    last_seq: int
    archived_at: float
    rows: list[StoredRow]


def build(session: Session, data_dir: Path, work: Path, out: Path) -> Manifest:
    """Write the session's object to `out`; `work` is an empty folder for the bundles."""
    events = "".join(json.dumps(asdict(row), ensure_ascii=False) + "\n" for row in session.rows)
    events_bytes = events.encode("utf-8", errors="surrogatepass")
    folders = files.folders_of(data_dir, session.session_id)
    manifest = Manifest(
        session_id=session.session_id,
        archived_at=session.archived_at,
        status=session.status,
        last_seq=session.last_seq,
        rows=len(session.rows),
        events_sha256=hashlib.sha256(events_bytes).hexdigest(),
        folders=folders,
        xattrs=files.xattrs_of(data_dir, folders),
        checkpoints=checkpoints.bundle(data_dir, session.session_id, work),
    )
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, MANIFEST, json.dumps(asdict(manifest), indent=1).encode())
        _add_bytes(tar, EVENTS, events_bytes)
        for part in sorted(work.iterdir()):
            tar.add(part, arcname=f"{_CHECKPOINTS}/{part.name}")
        files.add_folders(tar, data_dir, folders)
    return manifest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))


def unpack(path: Path, session_id: str, staging: Path) -> tuple[Manifest, list[StoredRow]]:
    """Check and extract an object into `staging`; its manifest and rows.

    Raises `ArchiveDamaged` for anything that is not an object of this session in this format.
    """
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = tar.getmembers()
            manifest = _manifest(_read(tar, MANIFEST), session_id)
            rows = _rows(_read(tar, EVENTS), manifest)
            _check_members(members, manifest)
            # Every member was checked above, and the object matched the checksum taken when it
            # was written; links are the session's own files (a checkout may hold absolute ones).
            tar.extractall(  # noqa: S202
                staging, members=members, numeric_owner=True, filter="fully_trusted"
            )
    except ArchiveDamaged as exc:
        raise ArchiveDamaged(f"session {session_id}: its archive cannot be used: {exc}") from None
    except (tarfile.TarError, OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise ArchiveDamaged(f"session {session_id}: its archive cannot be read: {exc}") from None
    return manifest, rows


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    stream = tar.extractfile(name)
    if stream is None:
        raise ArchiveDamaged(f"the archive's {name} is not a file")
    return stream.read()


def _manifest(data: bytes, session_id: str) -> Manifest:
    raw = json.loads(data)
    if raw.get("format") != FORMAT:
        raise ArchiveDamaged(f"archive format {raw.get('format')!r}; this Kestrel reads {FORMAT}")
    raw["checkpoints"] = [RepoPart(**part) for part in raw.get("checkpoints", [])]
    manifest = Manifest(**raw)
    if manifest.session_id != session_id:
        raise ArchiveDamaged(f"the archive holds session {manifest.session_id}, not {session_id}")
    places = files.allowed_folders(session_id)
    if not set(manifest.folders) <= places or any(
        not _within(path, manifest.folders) for path in manifest.xattrs
    ):
        raise ArchiveDamaged(f"the archive names folders other than session {session_id}'s")
    if any(not _REPO.fullmatch(part.repo) for part in manifest.checkpoints):
        raise ArchiveDamaged("the archive names a checkpoint repository that cannot be one")
    return manifest


def _rows(data: bytes, manifest: Manifest) -> list[StoredRow]:
    if hashlib.sha256(data).hexdigest() != manifest.events_sha256:
        raise ArchiveDamaged("the archive's events do not match their checksum")
    rows = [
        StoredRow(**json.loads(line)) for line in data.decode("utf-8", "surrogatepass").splitlines()
    ]
    if len(rows) != manifest.rows or any(r.seq > manifest.last_seq for r in rows):
        raise ArchiveDamaged("the archive's events are not the ones its manifest lists")
    return rows


def _check_members(members: list[tarfile.TarInfo], manifest: Manifest) -> None:
    """Refuse a member that would land outside its place, or pass through a link."""
    allowed = [f"{files.DATA}/{folder}" for folder in manifest.folders]
    named = {MANIFEST, EVENTS, _CHECKPOINTS}
    for part in manifest.checkpoints:
        named |= {f"{_CHECKPOINTS}/{part.repo}.bundle", f"{_CHECKPOINTS}/{part.repo}.index"}
    links: set[str] = set()
    for member in members:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or member.name != path.as_posix():
            raise ArchiveDamaged(f"the archive holds a member named {member.name!r}")
        if any(str(parent) in links for parent in path.parents):
            raise ArchiveDamaged(f"the archive holds {member.name} behind a link")
        if member.islnk() and not _within(member.linkname, allowed):
            raise ArchiveDamaged(f"the archive links {member.name} to {member.linkname}")
        if member.name not in named and not _within(member.name, allowed):
            raise ArchiveDamaged(f"the archive holds {member.name}, outside the session's folders")
        if member.issym() or member.islnk():
            links.add(member.name)


def _within(name: str, allowed: list[str]) -> bool:
    return any(name == place or name.startswith(place + "/") for place in allowed)
