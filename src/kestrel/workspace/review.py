"""A session's change as one reviewable set: what differs between two checkpoints.

The session's first checkpoint records the files as the session found them and its newest one
what it left, whichever way the files were changed (edit tools, commands, a rewind). So the
change to review and apply is the difference of two trees in the shadow repository, read with
git's plumbing; nothing here needs the overlay to be mounted. Git never records special files
or anything under `.git`, so neither can ever reach a change set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.shadow_git import GitFailed, ShadowGit

_EXECUTABLE = "100755"
_SYMLINK = "120000"
_GITLINK = "160000"


def build_change_set(git: ShadowGit, base: str, head: str) -> ChangeSet:
    """The change from commit `base` to commit `head` with every side's content."""
    raw = git.run(
        "diff-tree", "-r", "-z", "-M", "--raw", "--no-commit-id", "--no-abbrev", base, head
    ).stdout
    rows = list(parse_raw(raw))
    wanted = {sha for row in rows for sha in (row.old_sha, row.new_sha) if not _empty(sha)}
    blobs = read_blobs(git, wanted)
    changes: list[Change] = []
    for row in rows:
        old = _entry(row.old_mode, row.old_sha, blobs)
        new = _entry(row.new_mode, row.new_sha, blobs)
        if row.status == "R" and row.old_path is not None:
            changes.append(Change(path=row.old_path, base=old, new=None))
            changes.append(Change(path=row.path, base=None, new=new, old_path=row.old_path))
        else:
            changes.append(Change(path=row.path, base=old, new=new))
    tree = git.text("rev-parse", f"{base}^{{tree}}")
    return ChangeSet(changes=tuple(sorted(changes, key=lambda c: c.path)), base_tree=tree)


class RawRow:
    """One line of `git diff-tree --raw -z`."""

    __slots__ = ("new_mode", "new_sha", "old_mode", "old_path", "old_sha", "path", "status")

    def __init__(self, header: str, path: str, old_path: str | None) -> None:
        old_mode, new_mode, old_sha, new_sha, status = header.lstrip(":").split(" ")
        self.old_mode, self.new_mode = old_mode, new_mode
        self.old_sha, self.new_sha = old_sha, new_sha
        self.status = status[:1]
        self.path, self.old_path = path, old_path


def parse_raw(output: bytes) -> Iterable[RawRow]:
    """Rows of NUL-separated raw diff output; a rename or copy row carries two paths."""
    tokens = output.split(b"\0")
    position = 0
    while position < len(tokens):
        header = tokens[position].decode("ascii", errors="replace").strip()
        if not header.startswith(":"):
            position += 1
            continue
        status = header.rsplit(" ", 1)[-1][:1]
        if status in ("R", "C"):
            old, new = os.fsdecode(tokens[position + 1]), os.fsdecode(tokens[position + 2])
            position += 3
            if status == "C":  # A copy leaves its source alone: it is an addition.
                yield RawRow(header.replace(" C", " A", 1), new, None)
                continue
            yield RawRow(header, new, old)
            continue
        yield RawRow(header, os.fsdecode(tokens[position + 1]), None)
        position += 2


def read_blobs(git: ShadowGit, shas: Iterable[str]) -> dict[str, bytes]:
    """The content of each blob, read in one `git cat-file --batch`."""
    ordered = sorted(set(shas))
    if not ordered:
        return {}
    out = git.run("cat-file", "--batch", stdin=("\n".join(ordered) + "\n").encode()).stdout
    blobs: dict[str, bytes] = {}
    position = 0
    for sha in ordered:
        end = out.index(b"\n", position)
        header = out[position:end].split(b" ")
        if len(header) != 3:
            raise GitFailed(("cat-file", "--batch"), 1, f"blob {sha} is missing")
        size = int(header[2])
        blobs[sha] = out[end + 1 : end + 1 + size]
        position = end + 1 + size + 1  # The content is followed by a newline.
    return blobs


def _empty(sha: str) -> bool:
    return set(sha) == {"0"}


def _entry(mode: str, sha: str, blobs: dict[str, bytes]) -> Entry | None:
    if _empty(sha) or mode == "000000":
        return None
    if mode == _GITLINK:
        return Entry(kind="special")
    data = blobs.get(sha, b"")
    if mode == _SYMLINK:
        return Entry(kind="symlink", data=data)
    return Entry(kind="file", data=data, executable=mode == _EXECUTABLE)


def summary_line(changes: ChangeSet) -> str:
    """`3 files: 1 added, 1 modified, 1 deleted` for a change set."""
    names = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "T": "mode changed"}
    counts = dict.fromkeys(names.values(), 0)
    renamed_from = {c.old_path for c in changes.changes if c.old_path}
    for change in changes.changes:
        if change.status == "D" and change.path in renamed_from:
            continue
        counts[names[change.status]] += 1
    total = sum(counts.values())
    parts = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    return f"{total} file{'s' if total != 1 else ''}: {parts}" if total else "no changes"
