"""The text a change added, file by file: what the security gate scans.

A file's added lines are the lines of its new content that are not in the content it had when
the change began, so that a finding on code the change did not write is never blamed on it.
Binary files, files too large to diff cheaply and symlinks are skipped, with the reason.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.workspace.changes import ChangeSet, Entry

MAX_SCAN_BYTES = 2_000_000
"""Larger files are generated or vendored; diffing and scanning them would only cost time."""
MAX_DIFF_CELLS = 4_000_000
"""Past this many line pairs (old times new, once shared ends are cut) every line counts as added,
rather than spend a long time matching them."""
_BINARY_PROBE = 8192

Baseline = Callable[[Sequence[str]], Mapping[str, bytes | None] | None]
"""For changed paths, the content each had when the change began (None: it did not exist). A
path left out of the mapping is unchanged since then and is not scanned; a None mapping means
unknown, and every line of a changed file counts as added."""


@dataclass(frozen=True, slots=True)
class ChangedText:
    """One changed text file: its new lines (numbered from 1) and which of them the change added."""

    path: str
    lines: tuple[str, ...]
    added: frozenset[int]

    @property
    def python(self) -> bool:
        """Whether the file is Python source."""
        return self.path.endswith((".py", ".pyi"))

    def text(self) -> str:
        """The whole new content."""
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class Collected:
    """The changed text files to scan, and those that could not be scanned, as `path: why`."""

    texts: tuple[ChangedText, ...]
    skipped: tuple[str, ...]


def changed_text(path: str, base: bytes | None, new: bytes) -> ChangedText | str:
    """The added lines of `path`, or why it is not scanned (binary, too large)."""
    if len(new) > MAX_SCAN_BYTES:
        return f"{path}: larger than {MAX_SCAN_BYTES // 1_000_000} MB"
    if b"\0" in new[:_BINARY_PROBE]:
        return f"{path}: binary"
    lines = tuple(_lines(new))
    old = _lines(base) if base is not None and b"\0" not in base[:_BINARY_PROBE] else []
    return ChangedText(path=path, lines=lines, added=added_lines(old, list(lines)))


def added_lines(old: Sequence[str], new: Sequence[str]) -> frozenset[int]:
    """Numbers (from 1) of the lines of `new` that are not matched to a line of `old`."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    middle_old, middle_new = old[start:end_old], new[start:end_new]
    if not middle_old or len(middle_old) * len(middle_new) > MAX_DIFF_CELLS:
        return frozenset(range(start + 1, end_new + 1))
    matcher = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False)
    added: set[int] = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added.update(range(start + j1 + 1, start + j2 + 1))
    return frozenset(added)


def _lines(data: bytes) -> list[str]:
    # Split on "\n" only, as compilers and scanners number lines; a lone "\r" is dropped so
    # that no reader of the text splits a line the diff kept whole.
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def from_change_set(changes: ChangeSet) -> Collected:
    """The text files a change set writes, each with the lines it adds."""
    bases = {c.path: c.base for c in changes.changes}
    texts: list[ChangedText] = []
    skipped: list[str] = []
    for change in changes.changes:
        if change.new is None or change.new.kind != "file":
            continue  # deleted, a symlink or a special file: no text the change adds
        base: Entry | None = change.base
        if change.old_path is not None:
            base = bases.get(change.old_path)  # a rename: compare with where it came from
        found = changed_text(change.path, _file_data(base), change.new.data)
        _collect(found, texts, skipped)
    return Collected(tuple(texts), tuple(skipped))


def from_disk(root: Path, paths: Sequence[str], baseline: Baseline | None) -> Collected:
    """The changed files under `root` as they are now; without a baseline every line counts
    as added, since nothing says what was there before."""
    bases = baseline(paths) if baseline is not None else None
    texts: list[ChangedText] = []
    skipped: list[str] = []
    for path in paths:
        if bases is not None and path not in bases:
            continue
        new = _read_regular(root / path)
        if isinstance(new, str):
            if new:
                skipped.append(f"{path}: {new}")
            continue
        base = bases.get(path) if bases is not None else None
        _collect(changed_text(path, base, new), texts, skipped)
    return Collected(tuple(texts), tuple(skipped))


def _collect(found: ChangedText | str, texts: list[ChangedText], skipped: list[str]) -> None:
    if isinstance(found, str):
        skipped.append(found)
    elif found.added:
        texts.append(found)


def _file_data(entry: Entry | None) -> bytes | None:
    return entry.data if entry is not None and entry.kind == "file" else None


def _read_regular(target: Path) -> bytes | str:
    """The bytes of a regular file; else why not ("" for a path that is gone or not a file)."""
    try:
        info = os.lstat(target)
        if not stat.S_ISREG(info.st_mode):
            return ""  # a symlink (it may point anywhere) or a folder: not the change's text
        if info.st_size > MAX_SCAN_BYTES:
            return f"larger than {MAX_SCAN_BYTES // 1_000_000} MB"
        return target.read_bytes()
    except OSError:
        return ""  # deleted since: nothing it adds
