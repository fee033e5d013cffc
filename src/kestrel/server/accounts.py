"""Tenants, their users and the API tokens they sign in with, in one SQLite file or in the
cluster's PostgreSQL database.

A token's secret (`ks_` and 43 url-safe characters) is shown once, when it is created; the
database keeps only its SHA-256 digest and a short prefix to tell tokens apart in a list. A plain
digest is enough: the secret holds 256 random bits, so there is nothing to guess from the digest
that a slow, salted hash would protect.

The file is in WAL mode; every write is one `BEGIN IMMEDIATE` transaction, so several stores
(threads or processes) may share it. One store may be used from several threads. In PostgreSQL
every write is one transaction too, and the tables are the file's, in the `kestrel_server`
schema, with the layout's version in a row of `schema_versions`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import time
import unicodedata
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from kestrel.server.accounts_schema import SCHEMA_VERSION, open_file, prepare_shared
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
from kestrel.server.sql import Database, Tx

T = TypeVar("T")

TOKEN_PREFIX = "ks_"  # noqa: S105 - not a secret: the start every secret shares
"""How every token secret begins, so that a leaked one is easy to recognise."""

MAX_NAME_CHARS = 100
"""The longest tenant, user, plan name or token label."""

_TOKEN_SHAPE = re.compile(TOKEN_PREFIX + r"[A-Za-z0-9_-]{43}")
_SHOWN_CHARS = 6  # of the random part, kept for display: 36 of its 256 bits
_ID_BYTES = 12  # 96 random bits: ids can be neither enumerated nor guessed


class AccountStore:
    """Tenants, users and tokens in one SQLite file (created with its tables on first open), or
    in the cluster's PostgreSQL database (`sql_pg.PostgresDatabase`) that every server shares."""

    def __init__(
        self,
        where: Path | Database,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = 10.0,
    ) -> None:
        self._path = where if isinstance(where, Path) else None
        self._clock = clock
        if isinstance(where, Path):
            self._db: Database = open_file(where, busy_timeout_s)
        else:
            self._db = where
            self._db.write(prepare_shared)

    @property
    def path(self) -> Path | None:
        """The database file (None in PostgreSQL)."""
        return self._path

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        self._db.close()

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
        self._write(lambda tx: _insert(tx, "tenants", asdict(tenant)))
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

        def add(tx: Tx) -> None:
            _tenant(tx, tenant_id)
            _insert(tx, "users", asdict(user))

        self._write(add)
        return user

    def create_token(self, user_id: str, label: str = "") -> IssuedToken:
        """Issue a token for a user; the secret is in the result and is never stored."""
        label = _checked_name("token label", label, empty=True)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)

        def issue(tx: Tx) -> TokenInfo:
            user = tx.execute("SELECT tenant_id FROM users WHERE id = ?", (user_id,)).one()
            if user is None:
                raise UnknownUser(f"no user has the id {user_id!r}")
            info = TokenInfo(
                id=_new_id("tok"),
                user_id=user_id,
                tenant_id=str(user[0]),
                label=label,
                prefix=secret[: len(TOKEN_PREFIX) + _SHOWN_CHARS],
                created_at=self._clock(),
            )
            columns = asdict(info) | {"digest": _digest(secret)}
            del columns["tenant_id"]  # the user's, not a column of its own
            _insert(tx, "tokens", columns)
            return info

        return IssuedToken(token=self._write(issue), secret=secret)

    def authenticate(self, secret: str) -> Principal | None:
        """Who `secret` signs in as; None for a malformed, unknown or revoked token."""
        if not isinstance(secret, str) or _TOKEN_SHAPE.fullmatch(secret) is None:
            return None
        digest = _digest(secret)
        found = self._read(
            lambda tx: tx.execute(
                "SELECT k.digest, k.id AS token_id, k.user_id, u.tenant_id, u.role, t.plan FROM"
                " tokens k JOIN users u ON u.id = k.user_id JOIN tenants t ON t.id = u.tenant_id"
                " WHERE k.digest = ? AND k.revoked_at IS NULL",
                (digest,),
            ).dicts()
        )
        # The lookup already matched; comparing again in constant time costs nothing and keeps
        # the decision independent of how the index compares strings.
        if not found or not hmac.compare_digest(str(found[0]["digest"]), digest):
            return None
        fields = found[0]
        del fields["digest"]
        return Principal(**fields)  # type: ignore[arg-type]

    def revoke_token(self, token_id: str, *, tenant_id: str | None = None) -> None:
        """Stop a token from authenticating; revoking it again changes nothing.

        With `tenant_id`, a token of another tenant counts as unknown (`UnknownToken`), so that
        one tenant's admin cannot revoke, or learn of, another tenant's tokens.
        """

        def revoke(tx: Tx) -> None:
            row = tx.execute(
                "SELECT u.tenant_id FROM tokens k JOIN users u ON u.id = k.user_id WHERE k.id = ?",
                (token_id,),
            ).one()
            if row is None or tenant_id not in (None, row[0]):
                raise UnknownToken(f"no token has the id {token_id!r}")
            tx.execute(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self._clock(), token_id),
            )

        self._write(revoke)

    def tokens(self, tenant_id: str) -> list[TokenInfo]:
        """Every token of the tenant's users, revoked ones too, oldest first; no secrets."""

        def rows(tx: Tx) -> list[dict[str, object]]:
            _tenant(tx, tenant_id)
            return tx.execute(
                "SELECT k.id, k.user_id, u.tenant_id, k.label, k.prefix, k.created_at,"
                " k.revoked_at FROM tokens k JOIN users u ON u.id = k.user_id"
                " WHERE u.tenant_id = ? ORDER BY k.created_at, k.rowid",
                (tenant_id,),
            ).dicts()

        return [TokenInfo(**row) for row in self._read(rows)]  # type: ignore[arg-type]

    def users(self, tenant_id: str) -> list[User]:
        """The tenant's users, oldest first; `UnknownTenant` if there is no such tenant."""

        def rows(tx: Tx) -> list[dict[str, object]]:
            _tenant(tx, tenant_id)
            return tx.execute(
                "SELECT id, tenant_id, name, role, created_at FROM users WHERE tenant_id = ?"
                " ORDER BY created_at, rowid",
                (tenant_id,),
            ).dicts()

        return [User(**row) for row in self._read(rows)]  # type: ignore[arg-type]

    def tenants(self) -> list[Tenant]:
        """Every tenant, oldest first."""
        rows = self._read(
            lambda tx: tx.execute(
                "SELECT id, name, plan, created_at FROM tenants ORDER BY created_at, rowid"
            ).dicts()
        )
        return [Tenant(**row) for row in rows]  # type: ignore[arg-type]

    def tenant(self, tenant_id: str) -> Tenant:
        """The tenant with this id; `UnknownTenant` if there is none."""
        return self._read(lambda tx: _tenant(tx, tenant_id))

    def set_plan(self, tenant_id: str, plan: str) -> Tenant:
        """Move a tenant to another plan; its tokens carry the new plan from the next request."""
        plan = _checked_name("plan name", plan)

        def move(tx: Tx) -> Tenant:
            _tenant(tx, tenant_id)
            tx.execute("UPDATE tenants SET plan = ? WHERE id = ?", (plan, tenant_id))
            return _tenant(tx, tenant_id)

        return self._write(move)

    def ping(self) -> None:
        """Reach the database now, or raise (a readiness check)."""
        self._guarded(lambda: self._db.ping())

    def _read(self, work: Callable[[Tx], T]) -> T:
        return self._guarded(lambda: self._db.read(work))

    def _write(self, work: Callable[[Tx], T]) -> T:
        return self._guarded(lambda: self._db.write(work))

    def _guarded(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except sqlite3.Error as exc:  # PostgreSQL's faults are `StoreError`s already.
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


def _insert(tx: Tx, table: str, row: dict[str, object]) -> None:
    names, marks = ", ".join(row), ", ".join("?" * len(row))
    # Table and column names are this module's own, never a caller's; values are parameters.
    tx.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(row.values()))  # noqa: S608


def _tenant(tx: Tx, tenant_id: str) -> Tenant:
    rows = tx.execute(
        "SELECT id, name, plan, created_at FROM tenants WHERE id = ?", (tenant_id,)
    ).dicts()
    if not rows:
        raise UnknownTenant(f"no tenant has the id {tenant_id!r}")
    return Tenant(**rows[0])  # type: ignore[arg-type]


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
