"""The account tables' layout, and opening them: a SQLite file of its own (marked as an account
database, its version in `PRAGMA user_version`) or the cluster's PostgreSQL database (the same
tables in the `kestrel_server` schema, the version in a row of `schema_versions`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kestrel.server.accounts_types import AccountSchemaError, AccountStoreError
from kestrel.server.sql import SQLiteDatabase, Tx

SCHEMA_VERSION = 1
"""The layout of the database, kept in `PRAGMA user_version`."""

# Marks the file as an account database ("KSAC"), so another SQLite file is never mistaken for
# an empty one and filled with tables.
_APPLICATION_ID = 0x4B534143

_SCHEMA = (
    "CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL, plan TEXT NOT NULL,"
    " created_at REAL NOT NULL)",
    "CREATE TABLE users (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),"
    " name TEXT NOT NULL, role TEXT NOT NULL CHECK (role IN ('admin', 'member')),"
    " created_at REAL NOT NULL)",
    "CREATE TABLE tokens (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),"
    " digest TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, label TEXT NOT NULL,"
    " created_at REAL NOT NULL, revoked_at REAL)",
    "CREATE INDEX users_by_tenant ON users (tenant_id)",
    "CREATE INDEX tokens_by_user ON tokens (user_id)",
)
_SHARED_SCHEMA = (
    # `rowid` orders rows as they were inserted, as SQLite's own does.
    "CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " plan TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,"
    " rowid BIGINT GENERATED ALWAYS AS IDENTITY)",
    "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY,"
    " tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL,"
    " role TEXT NOT NULL CHECK (role IN ('admin', 'member')),"
    " created_at DOUBLE PRECISION NOT NULL, rowid BIGINT GENERATED ALWAYS AS IDENTITY)",
    "CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY,"
    " user_id TEXT NOT NULL REFERENCES users(id), digest TEXT NOT NULL UNIQUE,"
    " prefix TEXT NOT NULL, label TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,"
    " revoked_at DOUBLE PRECISION, rowid BIGINT GENERATED ALWAYS AS IDENTITY)",
    "CREATE INDEX IF NOT EXISTS users_by_tenant ON users (tenant_id)",
    "CREATE INDEX IF NOT EXISTS tokens_by_user ON tokens (user_id)",
    "CREATE TABLE IF NOT EXISTS schema_versions (part TEXT PRIMARY KEY, version INTEGER NOT NULL)",
)


def open_file(path: Path, busy_timeout_s: float) -> SQLiteDatabase:
    """The account file, created with its tables; another database is refused untouched."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = SQLiteDatabase(path, timeout_s=busy_timeout_s, wal=False)
    except (OSError, sqlite3.Error) as exc:
        raise AccountStoreError(f"cannot open the account database {path}: {exc}") from exc
    try:
        # Checked before anything is changed, so a file of something else is left as it was.
        db.write(lambda tx: _prepare_file(tx, path))
        db.enable_wal()
        db.read(lambda tx: tx.execute("PRAGMA foreign_keys = ON"))
    except sqlite3.Error as exc:
        db.close()
        raise AccountStoreError(f"the account database {path}: {exc}") from exc
    except BaseException:
        db.close()
        raise
    return db


def _prepare_file(tx: Tx, path: Path) -> None:
    application_id = int(str(_first(tx, "PRAGMA application_id")))
    version = int(str(_first(tx, "PRAGMA user_version")))
    if application_id == 0 and version == 0:
        if int(str(_first(tx, "SELECT count(*) FROM sqlite_master"))):
            raise AccountSchemaError(
                f"{path} is an SQLite database, but not a Kestrel account database"
            )
        for statement in _SCHEMA:
            tx.execute(statement)
        tx.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
        tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    elif application_id != _APPLICATION_ID:
        raise AccountSchemaError(f"{path} is not a Kestrel account database")
    elif version != SCHEMA_VERSION:  # tables and version are written in one transaction
        raise AccountSchemaError(
            f"the account database {path} has schema version {version}, but this "
            f"Kestrel reads only version {SCHEMA_VERSION}; upgrade Kestrel"
        )


def prepare_shared(tx: Tx) -> None:
    """The tables in the cluster's database, and the layout's version beside them."""
    from kestrel.server.sql_pg import SCHEMA, lock_migrations

    lock_migrations(tx)
    tx.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    for statement in _SHARED_SCHEMA:
        tx.execute(statement)
    tx.execute(
        "INSERT INTO schema_versions (part, version) VALUES ('accounts', ?)"
        " ON CONFLICT (part) DO NOTHING",
        (SCHEMA_VERSION,),
    )
    version = int(str(_first(tx, "SELECT version FROM schema_versions WHERE part = 'accounts'")))
    if version != SCHEMA_VERSION:
        raise AccountSchemaError(
            f"the account tables have schema version {version}, but this Kestrel reads only "
            f"version {SCHEMA_VERSION}; upgrade Kestrel"
        )


def _first(tx: Tx, sql: str) -> object:
    row = tx.execute(sql).one()
    assert row is not None
    return row[0]
