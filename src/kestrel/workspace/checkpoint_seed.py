"""Seed a session's private checkpoint index from the checkout's own index, to skip rehashing.

A first checkpoint without a seed hashes every file of the checkout into the shadow repository.
When the worktree is a git checkout, its index already says which blob each file holds and what
the file's stat data was; with those entries in the private index, `git add --all` only reads
the files whose stat data changed. The blobs (and the trees the index has cached) are copied
from the checkout's object store into one pack of the shadow repository first, so the shadow
never depends on objects that a later `git gc` of the checkout could remove.

Nothing of the checkout is written, and nothing of it is run: its index is parsed here (never
handed to git as it is), its objects are read through `GIT_ALTERNATE_OBJECT_DIRECTORIES` for
the two commands that copy them, and its config and hooks are never looked at.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from kestrel.workspace.git_index import IndexEntry, IndexUnusable, parse_index, write_index
from kestrel.workspace.shadow_git import CheckpointError, ShadowGit

_GITDIR_PREFIX = "gitdir:"
_MAX_INDEX_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class CheckoutGit:
    """Where a checkout keeps its index, its objects and its `info/exclude` file."""

    index: Path
    objects: Path
    exclude: Path


def locate_checkout_git(worktree: Path) -> CheckoutGit | None:
    """The git directory of a checkout (a `.git` folder, or a `.git` file naming one), or None."""
    dot = worktree / ".git"
    try:
        if dot.is_dir() and not dot.is_symlink():
            git_dir = dot
        elif dot.is_file() and not dot.is_symlink():
            line = dot.read_text(encoding="utf-8").strip()
            if not line.startswith(_GITDIR_PREFIX):
                return None
            git_dir = (worktree / line[len(_GITDIR_PREFIX) :].strip()).resolve()
        else:
            return None
        common = git_dir
        commondir = git_dir / "commondir"
        if commondir.is_file():
            common = (git_dir / commondir.read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return CheckoutGit(git_dir / "index", common / "objects", common / "info" / "exclude")


def seed_index(git: ShadowGit, shadow_dir: Path, index_file: Path, worktree: Path) -> str | None:
    """Write `index_file` from the checkout's index; None when done, else why it was not.

    On any refusal nothing is written and the caller goes on as without a seed (an empty
    index, every file hashed).
    """
    checkout = locate_checkout_git(worktree)
    if checkout is None:
        return "the worktree is not a git checkout"
    objects = str(checkout.objects)
    if ":" in objects or objects.startswith('"') or not checkout.objects.is_dir():
        return f"cannot read objects from {objects}"
    try:
        with checkout.index.open("rb") as file:
            info = os.fstat(file.fileno())
            if info.st_size > _MAX_INDEX_BYTES:
                return "the checkout's index is too large"
            parsed = parse_index(file.read())
    except OSError as error:
        return f"cannot read the checkout's index: {error.strerror or error}"
    except IndexUnusable as error:
        return f"the checkout's index is unusable: {error}"
    try:
        present = _copy_objects(git, shadow_dir, objects, parsed.entries, parsed.tree_oids)
    except CheckpointError as error:
        return f"cannot copy the checkout's objects: {error}"
    kept = tuple(entry for entry in parsed.entries if entry.oid.hex() in present)
    partial = index_file.with_name(index_file.name + ".seed")
    try:
        partial.write_bytes(write_index(kept))
        # The index's own time tells git which entries are "racily clean" (changed in the second
        # the index was written): keeping the checkout's time keeps git re-reading exactly those.
        os.utime(partial, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(partial, index_file)
    except OSError as error:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return f"cannot write the seeded index: {error.strerror or error}"
    return None


def _copy_objects(
    git: ShadowGit,
    shadow_dir: Path,
    objects: str,
    entries: tuple[IndexEntry, ...],
    tree_oids: tuple[bytes, ...],
) -> set[str]:
    """Copy the blobs and trees the shadow lacks into one pack; the ids now in the shadow."""
    wanted = {entry.oid.hex(): "blob" for entry in entries}
    wanted.update((oid.hex(), "tree") for oid in tree_oids if oid.hex() not in wanted)
    have = _in_shadow(git, wanted)
    lacking = {oid: kind for oid, kind in wanted.items() if oid not in have}
    borrow = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": objects}
    copy = _present(git, lacking, borrow)
    if copy:
        listing = "".join(f"{oid}\n" for oid in sorted(copy)).encode()
        pack = str(shadow_dir / "objects" / "pack" / "pack")
        git.run("pack-objects", "--quiet", pack, stdin=listing, extra_env=borrow)
    return have | copy


def _in_shadow(git: ShadowGit, wanted: dict[str, str]) -> set[str]:
    """Which of `wanted` the shadow repository already holds with the expected type.

    One listing of the shadow's objects: asking for each id would make git rescan its packs
    after every miss, and a new shadow misses them all.
    """
    out = git.run(
        "cat-file",
        "--batch-all-objects",
        "--unordered",
        "--batch-check=%(objectname) %(objecttype)",
    ).stdout.decode("ascii", errors="replace")
    return _matching(out, wanted)


def _present(git: ShadowGit, wanted: dict[str, str], env: dict[str, str] | None) -> set[str]:
    """Which of `wanted` (id to expected type) the object store holds with that type."""
    if not wanted:
        return set()
    listing = "".join(f"{oid}\n" for oid in wanted).encode()
    out = git.run(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=listing, extra_env=env
    ).stdout.decode("ascii", errors="replace")
    return _matching(out, wanted)


def _matching(out: str, wanted: dict[str, str]) -> set[str]:
    """The ids of `--batch-check` lines whose type is the one wanted."""
    found: set[str] = set()
    for line in out.splitlines():
        oid, _, kind = line.partition(" ")
        if wanted.get(oid) == kind:
            found.add(oid)
    return found
