"""Conventions a tenant's sessions start with, per repository, kept in the server's own store.

A hosted session starts with its repository's own `.kestrel/memory.md` (part of the repository)
and then with what its tenant keeps for that repository here: entries added through the API, or
accepted from a pull request's review. Every query takes the tenant, so one tenant's entries
never reach another tenant's sessions, even on the same repository.

A repository is named by where a session's files came from: `HOST/PATH` of a git URL
(`github.com/acme/shop` for `https://github.com/acme/shop.git` and `git@github.com:acme/shop`),
`path:FOLDER` for a folder on the server; an upload names none, so it has no hosted memory.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kestrel.memory_store import MemoryEntryError, context_text, entry_text
from kestrel.server.intake import GitUrl, LocalPath, RepositorySource
from kestrel.server.sql import Database, SQLiteDatabase, Tx

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memory (
    tenant_id TEXT NOT NULL,
    id TEXT NOT NULL,
    repository TEXT NOT NULL,
    text TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant_id, id)
)""",
    "CREATE INDEX IF NOT EXISTS memory_by_repository ON memory (tenant_id, repository, created_at)",
    """CREATE TABLE IF NOT EXISTS session_repository (
    session_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    repository TEXT NOT NULL
)""",
)
MAX_ENTRIES = 200
"""Entries a tenant may keep for one repository: every session of it starts with all of them."""


@dataclass(frozen=True, slots=True)
class HostedEntry:
    """One convention a tenant keeps for a repository."""

    id: str
    repository: str
    text: str
    source: str
    created_at: float


def repository_key(source: RepositorySource) -> str:
    """The name hosted memory files a session's repository under; '' for an upload."""
    if isinstance(source, GitUrl):
        return _url_key(source.url)
    if isinstance(source, LocalPath):
        return f"path:{Path(source.path).resolve()}"
    return ""


def _url_key(url: str) -> str:
    if "://" in url:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        host += f":{parts.port}" if parts.port else ""
        path = parts.path
    else:  # user@host:path
        host, _, path = url.partition("@")[2].partition(":") if "@" in url else url.partition(":")
        host = host.lower()
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host}/{path}"


class HostedMemory:
    """The tenants' entries and which repository each hosted session works on (SQLite file,
    or the cluster's PostgreSQL database)."""

    def __init__(self, where: Path | Database) -> None:
        self._db = SQLiteDatabase(where) if isinstance(where, Path) else where
        self._db.migrate(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def remember_session(self, tenant_id: str, session_id: str, repository: str) -> None:
        """Record which repository a new session works on."""
        self._db.write(
            lambda tx: tx.execute(
                "INSERT INTO session_repository (session_id, tenant_id, repository) "
                "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "tenant_id = excluded.tenant_id, repository = excluded.repository",
                (session_id, tenant_id, repository),
            )
        )

    def repository_of(self, tenant_id: str, session_id: str) -> str:
        """The repository of the tenant's session; '' when it has none (or is not theirs)."""
        row = self._db.read(
            lambda tx: tx.execute(
                "SELECT repository FROM session_repository WHERE tenant_id = ? AND session_id = ?",
                (tenant_id, session_id),
            ).one()
        )
        return str(row[0]) if row else ""

    def entries(self, tenant_id: str, repository: str | None = None) -> list[HostedEntry]:
        """The tenant's entries (for one repository when given), oldest first."""
        query = "SELECT id, repository, text, source, created_at FROM memory WHERE tenant_id = ?"
        args: tuple[str, ...] = (tenant_id,)
        if repository is not None:
            query += " AND repository = ?"
            args += (repository,)
        rows = self._db.read(lambda tx: tx.execute(query + " ORDER BY created_at, id", args).rows)
        return [
            HostedEntry(str(a), str(b), str(c), str(d), float(str(e))) for a, b, c, d, e in rows
        ]

    def add(self, tenant_id: str, repository: str, text: str, source: str) -> HostedEntry:
        """Keep an entry for the tenant's repository; MemoryEntryError for an empty, too long
        or duplicate one, or past `MAX_ENTRIES`."""
        if not repository:
            raise MemoryEntryError(
                "the session's repository has no name (an upload), so it has no hosted memory"
            )
        text = entry_text(text)
        entry = HostedEntry(_id(repository, text), repository, text, source[:200], time.time())

        def insert(tx: Tx) -> None:
            count = tx.execute(
                "SELECT COUNT(*) FROM memory WHERE tenant_id = ? AND repository = ?",
                (tenant_id, repository),
            ).one()
            if count is not None and int(str(count[0])) >= MAX_ENTRIES:
                raise MemoryEntryError(f"{repository} has {MAX_ENTRIES} entries; remove some")
            added = tx.execute(
                "INSERT INTO memory (tenant_id, id, repository, text, source, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, id) DO NOTHING",
                (tenant_id, entry.id, repository, text, entry.source, entry.created_at),
            )
            if added.rowcount != 1:
                raise MemoryEntryError(f"already remembered: {text}")

        self._db.write(insert)
        return entry

    def remove(self, tenant_id: str, entry_id: str) -> HostedEntry | None:
        """Forget the tenant's entry; None when the tenant has no such entry."""
        found = [e for e in self.entries(tenant_id) if e.id == entry_id]
        if not found:
            return None
        self._db.write(
            lambda tx: tx.execute(
                "DELETE FROM memory WHERE tenant_id = ? AND id = ?", (tenant_id, entry_id)
            )
        )
        return found[0]

    def context(self, tenant_id: str, repository: str) -> str:
        """The text a new session of the tenant on `repository` starts with; '' for none."""
        if not repository:
            return ""
        return context_text([e.text for e in self.entries(tenant_id, repository)])


def _id(repository: str, text: str) -> str:
    return hashlib.sha256(f"{repository}\n{text}".encode()).hexdigest()[:12]
