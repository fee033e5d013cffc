"""Conventions Kestrel has learned, kept where people can read and edit them.

A repository's entries are in `.kestrel/memory.md` at its root (shared with the repository, like
AGENTS.md); a user's in `memory.md` beside their settings file. Each entry is one Markdown
bullet; a comment after it says where it came from:

    - Use httpx, not requests, for HTTP calls. <!-- kestrel: review comment 1234 on acme/shop#7 -->

Every new session starts with the entries as context (a `context_added` event with source
`memory`), so what a reviewer taught once is known from then on. A hosted session gets its
repository's entries only (the server's own user entries would reach every tenant), and then its
tenant's entries for that repository, which the server keeps in its own store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Scope = Literal["project", "user"]
FILE_NAME = "memory.md"
HEADER = (
    "# What Kestrel has learned\n\n"
    "Conventions from reviews and from you, one per line; Kestrel reads them at the start of "
    "every session. Edit or remove lines freely.\n\n"
)
MAX_ENTRY = 500
_ENTRY = re.compile(r"^- (?P<text>.+?)(?:\s*<!-- kestrel: (?P<source>.*?) -->)?\s*$")
_RULE_WORDS = re.compile(
    r"\b(we (?:use|prefer|always|never|don't|do not)|always|never|prefer|instead of|"
    r"don't use|do not use|convention|our style|please use)\b",
    re.IGNORECASE,
)


class MemoryEntryError(ValueError):
    """An entry that cannot be added or removed; the message says why."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One learned convention, with a short id for `kestrel memory rm`."""

    id: str
    text: str
    source: str
    scope: Scope
    path: Path


def memory_file(scope: Scope, repository: Path, user_dir: Path) -> Path:
    """Where `scope`'s entries are kept."""
    return repository / ".kestrel" / FILE_NAME if scope == "project" else user_dir / FILE_NAME


def entries(repository: Path, user_dir: Path | None) -> list[Entry]:
    """The user's entries (when `user_dir` is given), then the repository's."""
    found: list[Entry] = []
    scopes: list[Scope] = ["user", "project"] if user_dir is not None else ["project"]
    for scope in scopes:
        path = memory_file(scope, repository, user_dir or repository)
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            match = _ENTRY.match(line.strip())
            if match:
                text = match.group("text").strip()
                found.append(Entry(_id(text), text, match.group("source") or "", scope, path))
    return found


def entry_text(text: str) -> str:
    """`text` as one entry (its whitespace made single spaces); MemoryEntryError for an empty
    or too long one."""
    text = " ".join(text.split())
    if not text:
        raise MemoryEntryError("an entry needs some text")
    if len(text) > MAX_ENTRY:
        raise MemoryEntryError(f"an entry is one convention, at most {MAX_ENTRY} characters")
    return text


def add(scope: Scope, repository: Path, user_dir: Path, text: str, source: str = "") -> Entry:
    """Append an entry; MemoryEntryError for an empty, multi-line or duplicate one."""
    text = entry_text(text)
    if any(e.text == text for e in entries(repository, user_dir)):
        raise MemoryEntryError(f"already remembered: {text}")
    path = memory_file(scope, repository, user_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = f" <!-- kestrel: {source.replace('--', '-')} -->" if source else ""
    old = path.read_text(encoding="utf-8").rstrip("\n") + "\n" if path.is_file() else HEADER
    _write(path, f"{old}- {text}{note}\n")
    return Entry(_id(text), text, source, scope, path)


def remove(entry_id: str, repository: Path, user_dir: Path) -> Entry:
    """Remove the entry whose id starts with `entry_id`; MemoryEntryError unless exactly one
    does."""
    matches = [e for e in entries(repository, user_dir) if e.id.startswith(entry_id)]
    if len(matches) != 1:
        found = "no entry" if not matches else f"{len(matches)} entries"
        raise MemoryEntryError(f"{found} with id {entry_id!r}; see `kestrel memory list`")
    gone = matches[0]
    lines = gone.path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not _is(line, gone.text)]
    _write(gone.path, "".join(kept))
    return gone


def as_context(repository: Path, user_dir: Path | None) -> str:
    """The entries as the text a new session starts with; '' when there are none."""
    return context_text([e.text for e in entries(repository, user_dir)])


def context_text(texts: Sequence[str]) -> str:
    """Entries as the text a new session starts with; '' when there are none."""
    if not texts:
        return ""
    lines = "\n".join(f"- {text}" for text in texts)
    return f"Conventions learned from earlier reviews of this work; follow them:\n{lines}"


def proposals(comments: list[str]) -> list[str]:
    """The review comments that state a rule ("we use httpx, not requests"), as entries."""
    found = []
    for comment in comments:
        first = " ".join(comment.strip().split())
        if _RULE_WORDS.search(first) and len(first) <= MAX_ENTRY:
            found.append(first[0].upper() + first[1:] if first else first)
    return list(dict.fromkeys(found))


def _is(line: str, text: str) -> bool:
    match = _ENTRY.match(line.strip())
    return match is not None and match.group("text").strip() == text


def _id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
