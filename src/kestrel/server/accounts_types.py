"""The account store's records and errors: tenants, users, tokens and who a request acts as."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kestrel.protocol.errors import KestrelError, StoreError

Role = Literal["admin", "member"]
"""What a user may do within its tenant: admins also manage users and tokens."""

ROLES: tuple[Role, ...] = ("admin", "member")
"""Every role."""


class AccountError(KestrelError):
    """Root of the errors of the account store."""


class InvalidAccountValue(AccountError, ValueError):
    """A name, label, role or plan name is not acceptable; the message says which and why."""


class AccountNotFound(AccountError, LookupError):
    """No tenant, user or token has the given id (or it belongs to another tenant)."""


class UnknownTenant(AccountNotFound):
    """No tenant has the given id."""


class UnknownUser(AccountNotFound):
    """No user has the given id."""


class UnknownToken(AccountNotFound):
    """No token has the given id within the given tenant."""


class AccountStoreError(AccountError, StoreError):
    """The account database cannot be opened or used (a `StoreError`: the API answers 503)."""


class AccountSchemaError(AccountStoreError):
    """The file is not an account database, or one written by a newer Kestrel."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """An organisation: it owns users, sessions and a plan."""

    id: str
    name: str
    plan: str
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    """A person (or robot) within one tenant."""

    id: str
    tenant_id: str
    name: str
    role: Role
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenInfo:
    """What is known of a token after it was issued: everything but its secret."""

    id: str
    user_id: str
    tenant_id: str
    label: str
    prefix: str
    """The secret's first characters, for telling tokens apart; not enough to use it."""
    created_at: float
    revoked_at: float | None = None

    @property
    def revoked(self) -> bool:
        """Whether the token no longer authenticates anyone."""
        return self.revoked_at is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedToken:
    """A token just created: its secret is here, once, and never again."""

    token: TokenInfo
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who a request acts as: the token's user, its tenant and that tenant's plan now."""

    tenant_id: str
    user_id: str
    role: Role
    token_id: str
    plan: str
