"""Tenants, their users and the API tokens they sign in with, in one SQLite file.

A token's secret (`ks_` and 43 url-safe characters) is shown once, when it is created; the
database keeps only its SHA-256 digest and a short prefix to tell tokens apart in a list. A plain
digest is enough: the secret holds 256 random bits, so there is nothing to guess from the digest
that a slow, salted hash would protect.

The file is in WAL mode; every write is one `BEGIN IMMEDIATE` transaction, so several stores
(threads or processes) may share it. One store may be used from several threads.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from kestrel.server.accounts_types import (
    ROLES,
    AccountError,
    AccountNotFound,
    AccountSchemaError,
    AccountStoreError,
    InvalidAccountValue,
    IssuedToken,
    Principal,
    Role,
    Tenant,
    TokenInfo,
    UnknownTenant,
    UnknownToken,
    UnknownUser,
    User,
)

SCHEMA_VERSION = 1
"""The layout of the database, kept in `PRAGMA user_version`."""

TOKEN_PREFIX = "ks_"  # noqa: S105 - not a secret: the start every secret shares
"""How every token secret begins, so that a leaked one is easy to recognise."""

MAX_NAME_CHARS = 100
"""The longest tenant, user, plan name or token label."""

# Marks the file as an account database ("KSAC"), so another SQLite file is never mistaken for
# an empty one and filled with tables.
_APPLICATION_ID = 0x4B534143
_TOKEN_SHAPE = re.compile(TOKEN_PREFIX + r"[A-Za-z0-9_-]{43}")
_SHOWN_CHARS = 6  # of the random part, kept for display: 36 of its 256 bits
_ID_BYTES = 12  # 96 random bits: ids can be neither enumerated nor guessed

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


class AccountStore:
    """Tenants, users and tokens in one SQLite file, created with its tables on first open."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = 10.0,
    ) -> None:
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we issue BEGIN/COMMIT ourselves; the lock makes the one
            # connection safe to share between threads; timeout waits out other writers.
            self._conn = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
        except (OSError, sqlite3.Error) as exc:
            raise AccountStoreError(f"cannot open the account database {path}: {exc}") from exc
        try:
            # Checked before anything is changed, so a file of something else is left as it was.
            with self._write() as conn:
                self._prepare(conn)
            with self._guarded():
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            self._conn.close()
            raise

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> AccountStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def create_tenant(self, name: str, plan: str) -> Tenant:
        """Add a tenant on `plan` (a plan's name; which names exist is the caller's business)."""
        tenant = Tenant(
            id=_new_id("ten"),
            name=_checked_name("tenant name", name),
            plan=_checked_name("plan name", plan),
            created_at=self._clock(),
        )
        with self._write() as conn:
            _insert(conn, "tenants", asdict(tenant))
        return tenant

    def create_user(self, tenant_id: str, name: str, role: Role) -> User:
        """Add a user to a tenant; `UnknownTenant` if there is no such tenant."""
        if role not in ROLES:
            raise InvalidAccountValue(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        user = User(
            id=_new_id("usr"),
            tenant_id=tenant_id,
            name=_checked_name("user name", name),
            role=role,
            created_at=self._clock(),
        )
        with self._write() as conn:
            _tenant(conn, tenant_id)
            _insert(conn, "users", asdict(user))
        return user

    def create_token(self, user_id: str, label: str = "") -> IssuedToken:
        """Issue a token for a user; the secret is in the result and is never stored."""
        label = _checked_name("token label", label, empty=True)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._write() as conn:
            user = conn.execute("SELECT tenant_id FROM users WHERE id = ?", (user_id,)).fetchone()
            if user is None:
                raise UnknownUser(f"no user has the id {user_id!r}")
            info = TokenInfo(
                id=_new_id("tok"),
                user_id=user_id,
                tenant_id=user["tenant_id"],
                label=label,
                prefix=secret[: len(TOKEN_PREFIX) + _SHOWN_CHARS],
                created_at=self._clock(),
            )
            columns = asdict(info) | {"digest": _digest(secret)}
            del columns["tenant_id"]  # the user's, not a column of its own
            _insert(conn, "tokens", columns)
        return IssuedToken(token=info, secret=secret)

    def authenticate(self, secret: str) -> Principal | None:
        """Who `secret` signs in as; None for a malformed, unknown or revoked token."""
        if not isinstance(secret, str) or _TOKEN_SHAPE.fullmatch(secret) is None:
            return None
        digest = _digest(secret)
        with self._read() as conn:
            row = conn.execute(
                "SELECT k.digest, k.id AS token_id, k.user_id, u.tenant_id, u.role, t.plan FROM"
                " tokens k JOIN users u ON u.id = k.user_id JOIN tenants t ON t.id = u.tenant_id"
                " WHERE k.digest = ? AND k.revoked_at IS NULL",
                (digest,),
            ).fetchone()
        # The lookup already matched; comparing again in constant time costs nothing and keeps
        # the decision independent of how the index compares strings.
        if row is None or not hmac.compare_digest(row["digest"], digest):
            return None
        fields = dict(row)
        del fields["digest"]
        return Principal(**fields)

    def revoke_token(self, token_id: str, *, tenant_id: str | None = None) -> None:
        """Stop a token from authenticating; revoking it again changes nothing.

        With `tenant_id`, a token of another tenant counts as unknown (`UnknownToken`), so that
        one tenant's admin cannot revoke, or learn of, another tenant's tokens.
        """
        with self._write() as conn:
            row = conn.execute(
                "SELECT u.tenant_id FROM tokens k JOIN users u ON u.id = k.user_id WHERE k.id = ?",
                (token_id,),
            ).fetchone()
            if row is None or tenant_id not in (None, row["tenant_id"]):
                raise UnknownToken(f"no token has the id {token_id!r}")
            conn.execute(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self._clock(), token_id),
            )

    def tokens(self, tenant_id: str) -> list[TokenInfo]:
        """Every token of the tenant's users, revoked ones too, oldest first; no secrets."""
        with self._read() as conn:
            _tenant(conn, tenant_id)
            rows = conn.execute(
                "SELECT k.id, k.user_id, u.tenant_id, k.label, k.prefix, k.created_at,"
                " k.revoked_at FROM tokens k JOIN users u ON u.id = k.user_id"
                " WHERE u.tenant_id = ? ORDER BY k.created_at, k.rowid",
                (tenant_id,),
            ).fetchall()
        return [TokenInfo(**dict(row)) for row in rows]

    def users(self, tenant_id: str) -> list[User]:
        """The tenant's users, oldest first; `UnknownTenant` if there is no such tenant."""
        with self._read() as conn:
            _tenant(conn, tenant_id)
            rows = conn.execute(
                "SELECT id, tenant_id, name, role, created_at FROM users WHERE tenant_id = ?"
                " ORDER BY created_at, rowid",
                (tenant_id,),
            ).fetchall()
        return [User(**dict(row)) for row in rows]

    def tenants(self) -> list[Tenant]:
        """Every tenant, oldest first."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id, name, plan, created_at FROM tenants ORDER BY created_at, rowid"
            ).fetchall()
        return [Tenant(**dict(row)) for row in rows]

    def tenant(self, tenant_id: str) -> Tenant:
        """The tenant with this id; `UnknownTenant` if there is none."""
        with self._read() as conn:
            return _tenant(conn, tenant_id)

    def set_plan(self, tenant_id: str, plan: str) -> Tenant:
        """Move a tenant to another plan; its tokens carry the new plan from the next request."""
        plan = _checked_name("plan name", plan)
        with self._write() as conn:
            _tenant(conn, tenant_id)
            conn.execute("UPDATE tenants SET plan = ? WHERE id = ?", (plan, tenant_id))
            return _tenant(conn, tenant_id)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if application_id == 0 and version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise AccountSchemaError(
                    f"{self._path} is an SQLite database, but not a Kestrel account database"
                )
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif application_id != _APPLICATION_ID:
            raise AccountSchemaError(f"{self._path} is not a Kestrel account database")
        elif version != SCHEMA_VERSION:  # tables and version are written in one transaction
            raise AccountSchemaError(
                f"the account database {self._path} has schema version {version}, but this "
                f"Kestrel reads only version {SCHEMA_VERSION}; upgrade Kestrel"
            )

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._guarded():
            yield self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._guarded():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise AccountStoreError(f"the account database {self._path}: {exc}") from exc


def _new_id(kind: str) -> str:
    return f"{kind}_{secrets.token_urlsafe(_ID_BYTES)}"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _checked_name(what: str, name: str, *, empty: bool = False) -> str:
    if not isinstance(name, str):
        raise InvalidAccountValue(f"a {what} must be text, not {type(name).__name__}")
    name = name.strip()
    if not name and not empty:
        raise InvalidAccountValue(f"a {what} must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidAccountValue(
            f"a {what} may be at most {MAX_NAME_CHARS} characters, not {len(name)}"
        )
    # Names end up in logs and terminals, where a control character can forge or hide a line.
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise InvalidAccountValue(f"a {what} must not contain control characters")
    return name


def _insert(conn: sqlite3.Connection, table: str, row: dict[str, object]) -> None:
    names, marks = ", ".join(row), ", ".join("?" * len(row))
    # Table and column names are this module's own, never a caller's; values are parameters.
    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(row.values()))  # noqa: S608


def _tenant(conn: sqlite3.Connection, tenant_id: str) -> Tenant:
    row = conn.execute(
        "SELECT id, name, plan, created_at FROM tenants WHERE id = ?", (tenant_id,)
    ).fetchone()
    if row is None:
        raise UnknownTenant(f"no tenant has the id {tenant_id!r}")
    return Tenant(**dict(row))


__all__ = [
    "MAX_NAME_CHARS",
    "ROLES",
    "SCHEMA_VERSION",
    "TOKEN_PREFIX",
    "AccountError",
    "AccountNotFound",
    "AccountSchemaError",
    "AccountStore",
    "AccountStoreError",
    "InvalidAccountValue",
    "IssuedToken",
    "Principal",
    "Role",
    "Tenant",
    "TokenInfo",
    "UnknownTenant",
    "UnknownToken",
    "UnknownUser",
    "User",
]
