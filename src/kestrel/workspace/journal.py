"""The apply journal: stage new content and backups, commit, perform, recover after a crash.

`journal_dir` (outside the checkout) holds a `lock` file and one folder per apply, named by a random
hex id:

    <id>/new-<n>       the content op n puts in place (file bytes, or a symlink's target)
    <id>/old-<n>       the backup of what op n replaces or deletes: a hard link to the replaced
                       file where the filesystem allows one, else its bytes (or a link's target)
    <id>/journal.json  {"version", "id", "checkout", "state", "ops": [...]}, written last

`checkout` is the checkout's path, or "." for a journal kept inside the checkout's `.git`, which
names its checkout by where it lies (the same checkout is reached by different paths inside and
outside a session's namespace).

`journal.json` is the commit point: a folder without it never touched the checkout and is removed.
With it, `state` is "committed" (roll forward when every staged file is intact, else roll back) or
"rolling_back" (keep rolling back). Removing `journal.json` marks the journal done.

One flush makes the staged files, the backups and `journal.json` durable together, before the
checkout is touched. A crash before that flush may leave a `journal.json` whose staged files or
backups are incomplete; recovery then rolls back, and rolling back never writes a backup over a path
that still holds what the journal says it held before (nothing was done there), nor removes a file
that is not the one the journal put there. So an incomplete backup is only ever read where the apply
had already replaced the file, which it does only after the flush.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kestrel.protocol.errors import KestrelError
from kestrel.protocol.oserrors import os_error_text
from kestrel.workspace.changes import Entry

Fault = Callable[[str], None]
Action = Literal["write", "symlink", "delete"]
State = Literal["committed", "rolling_back"]
JOURNAL = "journal.json"
TEMP_MARK = ".kestrel-"
_VERSION = 2
_READABLE = (1, 2)  # version 1 journals carry no hash of the replaced content
_FOLDER_NAME = re.compile(r"[0-9a-f]{32}")


class ApplyError(KestrelError):
    """Applying or recovering failed for a reason other than a conflict or a refusal."""


class ApplyPending(ApplyError):
    """An earlier apply to this checkout was interrupted; run `recover` before applying again."""


@dataclass(frozen=True, slots=True)
class Step:
    """One planned operation: put `new` at `path` (None: delete it) where `old` is now."""

    path: str
    new: Entry | None
    old: Entry | None
    old_mode: int | None = None  # permission bits of the file replaced, restored on roll back
    mode: int | None = None  # permission bits for the written file; None: the umask decides
    made_dirs: tuple[str, ...] = ()  # missing parent folders, outermost first


@dataclass(frozen=True, slots=True)
class Op:
    """One operation as `journal.json` records it; file names are relative to the journal folder."""

    path: str
    action: Action
    staged: str | None
    sha256: str | None
    backup: str | None
    backup_kind: Literal["file", "symlink"] | None
    existed: bool
    mode: int | None
    old_mode: int | None
    made_dirs: tuple[str, ...]
    old_sha256: str | None = None  # of the replaced file's bytes or link target (version 2)


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What `recover` did with an interrupted apply: finished it or undid it, and which paths."""

    action: Literal["completed", "rolled_back"]
    paths: tuple[str, ...]
    journal_id: str


@contextlib.contextmanager
def locked(journal_dir: Path) -> Iterator[None]:
    """Hold the journal's lock, so that one apply or recovery runs at a time per journal."""
    journal_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(journal_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
        yield
    finally:
        os.close(fd)


def ensure_idle(journal_dir: Path) -> None:
    """Raise `ApplyPending` if an earlier apply left its journal behind; remove the folders of
    applies that finished or never committed (neither touches the checkout again)."""
    for folder in _folders(journal_dir):
        if (folder / JOURNAL).exists():
            raise ApplyPending(f"an interrupted apply is pending in {folder}; run recover first")
        shutil.rmtree(folder)


def commit(checkout: Path, journal_dir: Path, steps: list[Step], fault: Fault | None) -> None:
    """Stage, journal and perform `steps` on `checkout`; on an OS error undo them and raise."""
    folder = journal_dir / uuid.uuid4().hex
    folder.mkdir()
    try:
        ops = [_stage(checkout, folder, number, step) for number, step in enumerate(steps)]
        _hit(fault, "staged")
        _save(checkout, folder, ops, "committed", sync=False)
        # Staged files, backups and journal.json: one flush covers them all (module docstring).
        _flush_folder(folder)
    except OSError as error:
        shutil.rmtree(folder, ignore_errors=True)  # nothing in the checkout was touched yet
        raise ApplyError(f"cannot stage the change in {folder}: {os_error_text(error)}") from error
    _hit(fault, "journaled")
    try:
        _forward(checkout, folder, ops, fault)
    except OSError as error:
        _save(checkout, folder, ops, "rolling_back")
        _backward(checkout, folder, ops, None)
        _finish(folder, None)
        raise ApplyError(f"applying failed and was undone: {os_error_text(error)}") from error
    _finish(folder, fault)


def recover(
    checkout: Path, journal_dir: Path, *, fault: Fault | None = None, named: str | None = None
) -> RecoveryResult | None:
    """Finish or undo an interrupted apply; None when no committed journal was found.

    `named` is how the journal names its checkout when it reached `checkout` by another path
    (the overlay's bind of the checkout, inside a session's namespace); by default the journal
    must name `checkout` itself. `fault` is for tests: it is called with each step name ("op:N",
    "undo:N", "done", "cleanup") before that step, and raising from it simulates a crash there.
    """
    if not journal_dir.is_dir():
        return None
    root = checkout.resolve()
    result = None
    with locked(journal_dir):
        for folder in _folders(journal_dir):  # the lock allows at most one committed journal
            result = _recover_one(root, folder, fault, named) or result
    return result


def _recover_one(
    checkout: Path, folder: Path, fault: Fault | None, named: str | None
) -> RecoveryResult | None:
    loaded = _load(checkout, folder, named)
    if loaded is None:
        shutil.rmtree(folder)  # never committed: the checkout was not touched
        fsync_dir(folder.parent)
        return None
    state, ops = loaded
    paths = tuple(op.path for op in ops)
    if state == "committed" and all(_intact(folder, op) for op in ops):
        try:
            _forward(checkout, folder, ops, fault)
        except OSError:
            pass  # it cannot be finished: undo it instead
        else:
            _finish(folder, fault)
            return RecoveryResult("completed", paths, folder.name)
    # Once undoing starts, no later run finishes it; the journal keeps the name it was given.
    _save(named or checkout, folder, ops, "rolling_back")
    _backward(checkout, folder, ops, fault)
    _finish(folder, fault)
    return RecoveryResult("rolled_back", paths, folder.name)


def _stage(checkout: Path, folder: Path, number: int, step: Step) -> Op:
    staged = sha256 = backup = old_sha256 = None
    action: Action = "delete"
    if step.new is not None:
        staged = f"new-{number}"
        _write_new(
            folder / staged, step.new.data, 0o755 if step.new.executable else 0o644, sync=False
        )
        sha256 = hashlib.sha256(step.new.data).hexdigest()
        action = "symlink" if step.new.kind == "symlink" else "write"
    if step.old is not None:
        backup = f"old-{number}"
        old_sha256 = hashlib.sha256(step.old.data).hexdigest()
        _back_up(checkout / step.path, folder / backup, step.old)
    return Op(
        path=step.path,
        action=action,
        staged=staged,
        sha256=sha256,
        backup=backup,
        backup_kind=None
        if step.old is None
        else "symlink"
        if step.old.kind == "symlink"
        else "file",
        existed=step.old is not None,
        mode=step.mode,
        old_mode=step.old_mode,
        made_dirs=step.made_dirs,
        old_sha256=old_sha256,
    )


def _back_up(target: Path, backup: Path, old: Entry) -> None:
    """Keep what `target` holds: a hard link to the file when it still holds `old` (the apply
    replaces files by rename, so the linked file is never written), else a copy of `old`."""
    if old.kind == "file":
        try:
            os.link(target, backup, follow_symlinks=False)
        except OSError:  # another filesystem or mount, or one without hard links
            pass
        else:
            if _digest(backup) == hashlib.sha256(old.data).hexdigest():
                return
            backup.unlink()  # changed since it was read: keep the bytes the plan compared
    _write_new(backup, old.data, 0o600, sync=False)


def _forward(checkout: Path, folder: Path, ops: list[Op], fault: Fault | None) -> None:
    """Perform every op in order; each one may already have been done by an earlier run.

    Deletions go first (a file may make way for a folder). Then every new file is put beside
    its target and flushed, all together, so that the renames that follow only ever put whole
    files in place.
    """
    for number, op in enumerate(ops):
        if op.action == "delete":
            _hit(fault, f"op:{number}")
            _remove(checkout / op.path)
            _prune(checkout, (checkout / op.path).parent)
    copied = [_prepare(checkout, folder, number, op) for number, op in enumerate(ops)]
    flush([temp for temp in copied if temp is not None])
    for number, op in enumerate(ops):
        if op.action == "delete":
            continue
        _hit(fault, f"op:{number}")
        temp = _temp(checkout / op.path, folder.name, number)
        os.replace(temp, checkout / op.path)
        # rename() between two links to one file (a redone op) is a no-op that leaves `temp`.
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    _sync_parents(checkout, ops)


def _prepare(checkout: Path, folder: Path, number: int, op: Op) -> Path | None:
    """Put op's new content at its temp path beside the target; the temp path when copied."""
    if op.action == "delete":
        return None
    assert op.staged is not None  # every write has a staged file (checked on load)
    target = checkout / op.path
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = _temp(target, folder.name, number)
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()  # left by a crash before this op's rename
    staged = folder / op.staged
    if op.action == "symlink":
        os.symlink(os.fsdecode(staged.read_bytes()), temp)
        return None
    copied = _place(staged, temp)
    if op.mode is not None:
        os.chmod(temp, op.mode)
    return temp if copied else None


def _backward(checkout: Path, folder: Path, ops: list[Op], fault: Fault | None) -> None:
    """Put back what every op replaced or deleted, last op first; safe to run again."""
    for number in reversed(range(len(ops))):
        _hit(fault, f"undo:{number}")
        op = ops[number]
        target = checkout / op.path
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            _temp(target, folder.name, number).unlink()
        if op.backup is None:
            if op.sha256 is None or _holds(target, op.action, op.sha256, None) is not False:
                _remove(target)  # only what this apply put there (or nothing yet)
            for made in reversed(op.made_dirs):
                with contextlib.suppress(OSError):
                    (checkout / made).rmdir()  # only if still empty
            continue
        if op.old_sha256 is not None and _holds(
            target, op.backup_kind or "file", op.old_sha256, op.old_mode
        ):
            continue  # never replaced: nothing to undo (and the backup may be incomplete)
        backup = folder / op.backup
        if not backup.is_file():
            raise ApplyError(f"cannot restore {op.path}: its backup {backup} is missing")
        if op.old_sha256 is not None and _digest(backup) != op.old_sha256:
            raise ApplyError(f"cannot restore {op.path}: its backup {backup} is damaged")
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = _temp(target, folder.name, number)
        if op.backup_kind == "symlink":
            os.symlink(os.fsdecode(backup.read_bytes()), temp)
        else:
            if _place(backup, temp):  # a link or a copy: the backup survives a crash here
                _fsync_file(temp)
            if op.old_mode is not None:
                os.chmod(temp, op.old_mode)
        os.replace(temp, target)
    _sync_parents(checkout, ops)


def _finish(folder: Path, fault: Fault | None) -> None:
    """Mark the journal done by removing journal.json, then drop its staged files and backups.

    The removal is flushed before any staged file goes: a journal that came back after a crash
    with some staged files gone would roll a finished apply back. The folder's own removal need
    not be flushed; a folder without journal.json is removed by the next apply or recovery."""
    _hit(fault, "done")
    with contextlib.suppress(FileNotFoundError):
        (folder / JOURNAL).unlink()
    fsync_dir(folder)
    _hit(fault, "cleanup")
    shutil.rmtree(folder)


def _save(
    checkout: Path | str, folder: Path, ops: list[Op], state: State, *, sync: bool = True
) -> None:
    """Write journal.json atomically: a crash leaves the old version or the new one. With `sync`
    off the caller flushes the folder."""
    body = {
        "version": _VERSION,
        "id": folder.name,
        "checkout": checkout if isinstance(checkout, str) else _label(checkout, folder),
        "state": state,
        "ops": [asdict(op) for op in ops],
    }
    temp = folder / f"{JOURNAL}.tmp"
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()
    _write_new(temp, json.dumps(body, indent=1).encode(), 0o600, sync=sync)
    os.replace(temp, folder / JOURNAL)
    if sync:
        fsync_dir(folder)


def _load(checkout: Path, folder: Path, named: str | None) -> tuple[State, list[Op]] | None:
    """Read journal.json; None when the apply never committed. Raises on a foreign or bad one."""
    file = folder / JOURNAL
    try:
        body: Any = json.loads(file.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise ApplyError(f"{file} is not a readable journal: {error}") from error
    if not isinstance(body, dict) or body.get("version") not in _READABLE:
        raise ApplyError(f"{file} is not a journal of a version this Kestrel reads {_READABLE}")
    if body.get("checkout") != (named or _label(checkout, folder)):
        raise ApplyError(f"{file} belongs to the checkout {body.get('checkout')!r}, not {checkout}")
    state = body.get("state")
    if state not in ("committed", "rolling_back"):
        raise ApplyError(f"{file} has an unknown state {state!r}")
    try:
        ops = [_op(raw) for raw in body["ops"]]
    except (KeyError, TypeError, ValueError) as error:
        raise ApplyError(f"{file} has a malformed op: {error}") from error
    return state, ops


def _label(checkout: Path, folder: Path) -> str:
    """How journal.json names its checkout: "." when the journal lies inside it, else its path."""
    return "." if folder.is_relative_to(checkout) else str(checkout)


def _op(raw: Any) -> Op:
    op = Op(**{**raw, "made_dirs": tuple(raw["made_dirs"])})
    problem = next(filter(None, map(path_problem, (op.path, *op.made_dirs))), None)
    if problem or op.action not in ("write", "symlink", "delete"):
        raise ValueError(f"op on {op.path!r}: {problem or 'unknown action'}")
    if (op.staged is None) != (op.action == "delete"):
        raise ValueError(f"op on {op.path!r}: staged file does not match its action")
    return op


def path_problem(path: str) -> str | None:
    """Why `path` may not name a file in a checkout (absolute, `..`, `.git`, ...), or None."""
    if not path:
        return "the path is empty"
    if "\0" in path:
        return "the path contains a NUL byte"
    if path.startswith("/"):
        return "the path is absolute"
    parts = path.split("/")
    if "" in parts:
        return "the path has an empty component"
    if "." in parts or ".." in parts:
        return "the path has a '.' or '..' component"
    if any(is_git_dir(part) for part in parts):
        return "the path is inside git internals (.git)"
    return None


def is_git_dir(name: str) -> bool:
    """Whether a path component names git's folder on any filesystem Kestrel may run on."""
    # Case-insensitive filesystems, and Windows' trailing dots and spaces and 8.3 short names,
    # make these spellings the same folder; git itself refuses them for the same reason.
    return name.rstrip(". ").casefold() in (".git", "git~1")


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (new, renamed or removed names) to disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _folders(journal_dir: Path) -> list[Path]:
    if not journal_dir.is_dir():
        return []
    return sorted(
        path
        for path in journal_dir.iterdir()
        if _FOLDER_NAME.fullmatch(path.name) and path.is_dir() and not path.is_symlink()
    )


def _temp(target: Path, journal_id: str, number: int) -> Path:
    """The hidden name beside its target that an op prepares its content under."""
    return target.with_name(f".{target.name[:40]}{TEMP_MARK}{journal_id[:12]}-{number}")


def _intact(folder: Path, op: Op) -> bool:
    if op.staged is None:
        return True
    try:
        return _digest(folder / op.staged) == op.sha256
    except OSError:
        return False


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _holds(target: Path, kind: str, sha256: str, mode: int | None) -> bool | None:
    """Whether `target` holds exactly that file (bytes and, when given, permission bits) or that
    symlink; None when nothing is there."""
    try:
        info = target.lstat()
        if kind == "symlink":
            if not stat.S_ISLNK(info.st_mode):
                return False
            data = os.fsencode(os.readlink(target))
        elif stat.S_ISREG(info.st_mode):
            if mode is not None and stat.S_IMODE(info.st_mode) != mode:
                return False
            data = target.read_bytes()
        else:
            return False
    except (FileNotFoundError, NotADirectoryError):
        return None
    return hashlib.sha256(data).hexdigest() == sha256


def _place(staged: Path, temp: Path) -> bool:
    """Put staged content at `temp`: a hard link (no copy; the staged file stays), else a copy
    (True), which the caller must flush."""
    try:
        os.link(staged, temp)
    except OSError:  # another filesystem or mount, or one without hard links
        shutil.copyfile(staged, temp)
        shutil.copymode(staged, temp)
        return True
    return False


def _remove(target: Path) -> None:
    """Unlink a file or symlink if present; a folder there was made by a later op."""
    try:
        info = target.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISDIR(info.st_mode):
        target.unlink()


def _prune(checkout: Path, folder: Path) -> None:
    """Remove folders that a deletion left empty, up to (not including) the checkout."""
    while folder != checkout and checkout in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty, not a folder, or already gone
            return
        folder = folder.parent


def _sync_parents(checkout: Path, ops: Iterable[Op]) -> None:
    """Flush the folders whose entries changed: each target's own, and those that got a new
    folder; the folders above them did not change."""
    folders: set[Path] = set()
    for op in ops:
        folders.add((checkout / op.path).parent)
        folders.update((checkout / made).parent for made in op.made_dirs)
    if _syncfs(checkout):
        return
    for folder in sorted(folders, reverse=True):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            fsync_dir(folder)


def _write_new(path: Path, data: bytes, mode: int, *, sync: bool = True) -> None:
    """Create `path` (it must not exist) holding `data`, flushed to disk unless `sync` is off
    (the caller then flushes it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, mode), "wb") as stream:
        stream.write(data)
        stream.flush()
        if sync:
            os.fsync(stream.fileno())


def _flush_folder(folder: Path) -> None:
    """Make a journal folder's files and names durable, and the folder's own name."""
    if _syncfs(folder):
        return
    for name in os.listdir(folder):
        _fsync_file(folder / name)
    fsync_dir(folder)
    fsync_dir(folder.parent)


def flush(paths: Sequence[Path]) -> None:
    """Make the content of `paths` durable: one `syncfs` per filesystem where Linux has it (one
    journal commit instead of one per file), else an fsync of each."""
    done: set[int] = set()
    for path in paths:
        device = path.lstat().st_dev
        if device in done:
            continue
        if _syncfs(path):
            done.add(device)
        else:
            _fsync_file(path)


def _syncfs(path: Path) -> bool:
    """Flush the whole filesystem holding `path`; False where `syncfs` is not available."""
    libc = _libc()
    if libc is None:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return bool(libc.syncfs(fd) == 0)
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "syncfs") else None


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hit(fault: Fault | None, step: str) -> None:
    if fault is not None:
        fault(step)
