"""The persistent index of one repository: a SQLite file in the user's cache directory."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kestrel.context import write_log
from kestrel.context.model import FileKind, FileSymbols, Symbol
from kestrel.context.record import FileRecord

__all__ = ["SCHEMA_VERSION", "FileRecord", "Head", "IndexStore", "default_cache_dir"]

SCHEMA_VERSION = "4"
"""Bump when the layout, tokenisation or analysis changes: old indexes are then rebuilt."""
INDEX_FILE_NAME = "index.sqlite"
MIGRATED_SCHEMAS = frozenset({"3"})
"""Index formats opened by updating them in place (older ones are rebuilt)."""
"""Older formats whose rows are kept: version 4 only added the `files_head` index."""

Head = tuple[str, int, int, str, FileKind]
"""A record without its body: path, size, mtime_ns, content hash and kind."""


def default_cache_dir(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """`$KESTREL_CACHE_DIR`, else `$XDG_CACHE_HOME/kestrel`, else `~/.cache/kestrel`."""
    env = os.environ if env is None else env
    if explicit := env.get("KESTREL_CACHE_DIR"):
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "kestrel"
    return (Path.home() if home is None else home) / ".cache" / "kestrel"


def index_path_for(root: Path, cache_dir: Path) -> Path:
    """One index per repository directory, named by a hash of its real path."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return cache_dir / "index" / f"{root.resolve().name}-{key}" / INDEX_FILE_NAME


_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, term TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  hash TEXT NOT NULL, kind TEXT NOT NULL, symbols TEXT,
  terms BLOB NOT NULL, tfs BLOB NOT NULL,
  chunk_offsets BLOB NOT NULL, chunk_terms BLOB NOT NULL, chunk_tfs BLOB NOT NULL,
  vectors BLOB
);
CREATE INDEX IF NOT EXISTS files_head ON files(path, size, mtime_ns, hash, kind);
"""
    + write_log.SCHEMA
)


_HEADS = "SELECT path, size, mtime_ns, hash, kind FROM files INDEXED BY files_head"
_PATHS_PER_QUERY = 500
"""SQLite allows 999 parameters per statement in older builds."""
_SELECT = (
    "SELECT path, size, mtime_ns, hash, kind, symbols, terms, tfs,"
    " chunk_offsets, chunk_terms, chunk_tfs, vectors FROM files"
)


class IndexStore:
    """Reads and writes file records and the vocabulary; writes from several threads queue.

    `embedder` names the model whose vectors the index holds: vectors stored by another model
    are dropped on opening (the engine embeds those files again). None leaves them as they are.
    """

    def __init__(self, path: Path | None, *, embedder: str | None = None) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writing = threading.Lock()
        # Callers serialise access; allowing other threads lets a tool run the engine off-loop.
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), timeout=30, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        version = self._version()
        self.outdated: str | None = None
        """The format of an index found in an older layout, which was dropped to rebuild."""
        self.migrated: str | None = None
        """The format of an index found in an older layout that only lacked an index table."""
        if version in MIGRATED_SCHEMAS:
            self.migrated = version
        elif version not in (None, SCHEMA_VERSION):
            # An index is a cache: an old layout is rebuilt, never migrated.
            self.outdated = version
            self._db.executescript(
                "DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS vocab; "
                "DROP TABLE IF EXISTS written;"
            )
            self._db.execute("DELETE FROM meta WHERE key = 'token'")
        self._db.executescript(_SCHEMA)
        self._db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
        )
        self.token = self._meta("token") or secrets.token_hex(8)
        """Names this database's term ids: a snapshot made for another database is not used."""
        self._db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('token', ?)", (self.token,)
        )
        if embedder is not None and self._meta("embedder") != embedder:
            self._db.execute("UPDATE files SET vectors = NULL")
            self._db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('embedder', ?)", (embedder,)
            )
        self.embedder = self._meta("embedder")
        """The model whose vectors the index holds (None: none yet)."""
        self._db.commit()
        self._stamp = self._meta("generation") or ""
        self._writer = secrets.token_hex(6)
        self._writes = 0
        self._shared = False
        self._last_rowid = self._max_rowid()
        """The highest row id after this process's last write (or at opening): moved by
        another writer's records, stamped or not."""

    @property
    def generation(self) -> str | None:
        """Names the index's state: changed by every committed write of records or stats. A
        snapshot of the records as they were at one generation stands in for the rows while
        the index is still at it. None once another process has written to the index too (this
        one's records may then lack its changes). The highest row id is part of it, so that a
        writer that does not stamp (an older Kestrel) still changes it when it writes a record
        (a row it only deletes or restats is found by the next refresh's pass over the files)."""
        with self._writing:
            last = self._max_rowid()
        if self._shared or last != self._last_rowid:
            return None
        return f"{self._stamp}/{last}"

    def close(self) -> None:
        """Close the database."""
        with self._writing:
            self._db.close()

    def _version(self) -> str | None:
        try:
            return self._meta("schema")
        except sqlite3.OperationalError:
            return None

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def vocabulary(self) -> list[str]:
        """All terms, by id."""
        return [row[0] for row in self._db.execute("SELECT term FROM vocab ORDER BY id")]

    def vocabulary_from(self, start: int) -> list[str]:
        """The terms with ids from `start` on, by id."""
        rows = self._db.execute("SELECT term FROM vocab WHERE id >= ? ORDER BY id", (start,))
        return [row[0] for row in rows]

    def vocabulary_size(self) -> int:
        """How many terms there are (ids are dense from 0)."""
        return int(self._db.execute("SELECT COALESCE(MAX(id) + 1, 0) FROM vocab").fetchone()[0])

    def heads(self) -> list[Head]:
        """Every record's stat, hash and kind, read from an index without touching the bodies."""
        rows = self._db.execute(_HEADS)
        return rows.fetchall()

    def heads_of(self, paths: Sequence[str]) -> list[Head]:
        """The heads of these paths that have a row (in no particular order)."""
        out: list[Head] = []
        with self._writing:
            for at in range(0, len(paths), _PATHS_PER_QUERY):
                part = paths[at : at + _PATHS_PER_QUERY]
                marks = ",".join("?" * len(part))  # placeholders only: the paths are bound
                query = f"{_HEADS} WHERE path IN ({marks})"
                out += self._db.execute(query, part).fetchall()
        return out

    def record(self, path: str) -> FileRecord | None:
        """One stored record, whole."""
        row = self._db.execute(f"{_SELECT} WHERE path = ?", (path,)).fetchone()
        return None if row is None else _record(row)

    def records(self) -> Iterator[FileRecord]:
        """Every stored file record."""
        cursor = self._db.execute(_SELECT)
        for row in cursor:
            yield _record(row)

    def save(
        self,
        *,
        vocabulary: Sequence[str],
        upserts: Iterable[FileRecord],
        removals: Iterable[str],
    ) -> None:
        """Write changed records, removed paths and new vocabulary in one transaction."""
        records, gone = list(upserts), list(removals)
        with self._writing, self._db:
            self._begin_write()
            known = self._db.execute("SELECT COALESCE(MAX(id) + 1, 0) FROM vocab").fetchone()[0]
            self._db.executemany(
                "INSERT INTO vocab(id, term) VALUES (?, ?)",
                ((i, vocabulary[i]) for i in range(int(known), len(vocabulary))),
            )
            self._db.executemany("DELETE FROM files WHERE path = ?", ((p,) for p in gone))
            self._db.executemany(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_row(r) for r in records),
            )
            self._end_write([*gone, *(r.path for r in records)])

    def touch(self, stats: Iterable[tuple[str, int, int]]) -> None:
        """Record a new stat for files whose content did not change."""
        stats = list(stats)
        with self._writing, self._db:
            self._begin_write()
            self._db.executemany(
                "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                ((size, mtime, path) for path, size, mtime in stats),
            )
            self._end_write([path for path, _, _ in stats])

    def snapshot_point(self) -> tuple[str, int] | None:
        """The generation and write-log position, read together, for a snapshot of this
        process's records; None when another writer has written since this one last did."""
        with self._writing:
            own = not self._db.in_transaction
            if own:
                self._db.execute("BEGIN")  # one read transaction: both from the same state
            try:
                last = self._max_rowid()
                stamp = self._meta("generation") or ""
                position = write_log.position(self._db)
            finally:
                if own:
                    self._db.execute("COMMIT")
        if self._shared or last != self._last_rowid or stamp != self._stamp:
            return None
        return f"{self._stamp}/{last}", position

    def written_since(self, at: int) -> list[str] | None:
        """The paths written after log position `at` (None: the log cannot say)."""
        with self._writing:
            return write_log.since(self._db, at)

    def prune_log(self, at: int) -> None:
        """Forget the log up to position `at`: a snapshot holds what was written until then."""
        with self._writing, self._db:
            write_log.prune(self._db, at)

    def _begin_write(self) -> None:
        """Inside a write's transaction, before its rows: notice other writers."""
        found = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        if (found[0] if found else "") != self._stamp or self._max_rowid() != self._last_rowid:
            self._shared = True  # this process's records may lack what the other one wrote
        write_log.begin(self._db)

    def _end_write(self, paths: Sequence[str]) -> None:
        """Stamp this write and log its paths (inside its transaction)."""
        write_log.end(self._db, paths)
        self._writes += 1
        self._stamp = f"{self._writer}:{self._writes}"
        self._db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)", (self._stamp,)
        )
        self._last_rowid = self._max_rowid()

    def _max_rowid(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM files").fetchone()[0])


def _row(r: FileRecord) -> tuple[object, ...]:
    offsets = np.cumsum([0, *(len(c[0]) for c in r.chunks)]).astype(np.int32)
    chunk_terms = np.concatenate([c[0] for c in r.chunks]) if r.chunks else np.zeros(0, np.int32)
    chunk_tfs = np.concatenate([c[1] for c in r.chunks]) if r.chunks else np.zeros(0, np.float32)
    return (
        r.path,
        r.size,
        r.mtime_ns,
        r.content_hash,
        r.kind,
        None if r.symbols is None else symbols_json(r.symbols),
        r.terms[0].astype(np.int32).tobytes(),
        r.terms[1].astype(np.float32).tobytes(),
        offsets.tobytes(),
        chunk_terms.astype(np.int32).tobytes(),
        chunk_tfs.astype(np.float32).tobytes(),
        None if r.vectors is None else r.vectors.astype(np.float16).tobytes(),
    )


def _record(row: tuple[object, ...]) -> FileRecord:
    path, size, mtime, digest, kind, symbols, terms, tfs, offsets, c_terms, c_tfs, vectors = row
    bounds = np.frombuffer(_bytes(offsets), dtype=np.int32)
    all_terms = np.frombuffer(_bytes(c_terms), dtype=np.int32)
    all_tfs = np.frombuffer(_bytes(c_tfs), dtype=np.float32)
    chunks = tuple(
        (all_terms[bounds[i] : bounds[i + 1]], all_tfs[bounds[i] : bounds[i + 1]])
        for i in range(len(bounds) - 1)
    )
    return FileRecord(
        path=str(path),
        size=int(str(size)),
        mtime_ns=int(str(mtime)),
        content_hash=str(digest),
        kind=str(kind),  # type: ignore[arg-type]
        symbols=None if symbols is None else symbols_from_json(str(symbols)),
        terms=(
            np.frombuffer(_bytes(terms), dtype=np.int32),
            np.frombuffer(_bytes(tfs), dtype=np.float32),
        ),
        chunks=chunks,
        vectors=None if vectors is None else _vectors(_bytes(vectors), len(chunks) + 1),
    )


def _vectors(data: bytes, rows: int) -> npt.NDArray[np.float16] | None:
    flat = np.frombuffer(data, dtype=np.float16)
    if rows == 0 or len(flat) % rows:
        return None
    return flat.reshape(rows, len(flat) // rows)


def _bytes(value: object) -> bytes:
    assert isinstance(value, bytes)
    return value


def symbols_json(s: FileSymbols) -> str:
    """A symbol table as the index stores it."""
    return json.dumps(_symbols_json(s))


def symbols_from_json(text: str | bytes) -> FileSymbols:
    """A symbol table from what `symbols_json` wrote."""
    return _symbols_from(json.loads(text))


def _symbols_json(s: FileSymbols) -> dict[str, object]:
    return {
        "l": s.language,
        "d": [[d.name, d.qualname, d.kind, d.line, d.end_line, d.signature] for d in s.definitions],
        "r": list(s.references),
        "i": list(s.imports),
    }


def _symbols_from(data: dict[str, list[list[object]] | list[str] | str]) -> FileSymbols:
    definitions = tuple(
        Symbol(
            name=str(d[0]),
            qualname=str(d[1]),
            kind=str(d[2]),  # type: ignore[arg-type]
            line=int(str(d[3])),
            end_line=int(str(d[4])),
            signature=str(d[5]),
        )
        for d in data["d"]
        if isinstance(d, list)
    )
    return FileSymbols(
        language=str(data["l"]),
        definitions=definitions,
        references=tuple(str(x) for x in data["r"]),
        imports=tuple(str(x) for x in data["i"]),
    )
