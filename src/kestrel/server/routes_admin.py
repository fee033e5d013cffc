"""Routes for a tenant's own administration: its users and API tokens (admins only), and where
its sessions stand in the server's queue (every user)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from kestrel.server.accounts import Principal, UnknownToken
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.hosting import Refusal
from kestrel.server.routes_sessions import Strict

router = APIRouter(responses=ERRORS)


class UserView(BaseModel):
    """A user of the tenant."""

    id: str
    name: str
    role: Literal["admin", "member"]
    created_at: float


class TokenView(BaseModel):
    """An API token, without its secret."""

    id: str
    user_id: str
    label: str
    prefix: str
    created_at: float
    revoked_at: float | None


class TenantView(BaseModel):
    """The caller's tenant: its plan, users and tokens."""

    id: str
    name: str
    plan: str
    users: list[UserView]
    tokens: list[TokenView]


class NewUserBody(Strict):
    """A user to add to the tenant."""

    name: str = Field(min_length=1, max_length=100)
    role: Literal["admin", "member"] = "member"


class NewTokenBody(Strict):
    """A token to issue for one of the tenant's users."""

    user_id: str = Field(min_length=1, max_length=100)
    label: str = Field(default="", max_length=100)


class IssuedTokenView(BaseModel):
    """A new token: `secret` is shown here once and never again."""

    token: TokenView
    secret: str


class QueueView(BaseModel):
    """Where the tenant's sessions stand, and how busy the server is."""

    running: list[str]
    queued: list[str]
    """Oldest first."""
    workers: int


class MeView(BaseModel):
    """Who the token acts as: its user, role, tenant and the tenant's plan."""

    user_id: str
    role: Literal["admin", "member"]
    tenant_id: str
    plan: str


def _admin(who: Principal) -> None:
    if who.role != "admin":
        raise Refusal(403, "only an admin of the tenant may do this")


@router.get("/me")
def me(who: Caller) -> MeView:
    """Who the token acts as (any user): a client shows admins what only they may do."""
    return MeView(user_id=who.user_id, role=who.role, tenant_id=who.tenant_id, plan=who.plan)


@router.get("/tenant")
def tenant(who: Caller, host: Host) -> TenantView:
    """The tenant, its users and its tokens (admins only)."""
    _admin(who)
    found = host.accounts.tenant(who.tenant_id)
    users = host.accounts.users(who.tenant_id)
    tokens = host.accounts.tokens(who.tenant_id)
    return TenantView(
        id=found.id,
        name=found.name,
        plan=found.plan,
        users=[UserView(id=u.id, name=u.name, role=u.role, created_at=u.created_at) for u in users],
        tokens=[_token(t) for t in tokens],
    )


@router.post("/tenant/users", status_code=201)
def add_user(body: NewUserBody, who: Caller, host: Host) -> UserView:
    """Add a user to the tenant (admins only)."""
    _admin(who)
    made = host.accounts.create_user(who.tenant_id, body.name, body.role)
    return UserView(id=made.id, name=made.name, role=made.role, created_at=made.created_at)


@router.post("/tenant/tokens", status_code=201)
def issue_token(body: NewTokenBody, who: Caller, host: Host) -> IssuedTokenView:
    """Issue an API token for one of the tenant's users (admins only); the secret is in this
    answer once. Another tenant's user is as unknown as a missing one (404)."""
    _admin(who)
    if body.user_id not in {u.id for u in host.accounts.users(who.tenant_id)}:
        raise Refusal(404, f"no user {body.user_id}")
    issued = host.accounts.create_token(body.user_id, body.label)
    return IssuedTokenView(token=_token(issued.token), secret=issued.secret)


@router.delete("/tenant/tokens/{token_id}", status_code=204)
def revoke(token_id: str, who: Caller, host: Host) -> Response:
    """Revoke one of the tenant's tokens (admins only); requests with it get 401 from now on."""
    _admin(who)
    try:
        host.accounts.revoke_token(token_id, tenant_id=who.tenant_id)
    except UnknownToken:
        raise Refusal(404, f"no token {token_id}") from None
    return Response(status_code=204)


@router.get("/queue")
def queue(who: Caller, host: Host) -> QueueView:
    """The tenant's sessions that run and that wait for a worker, and the server's workers."""
    mine = host.registry.of_tenant(who.tenant_id)
    waiting = sorted((h for h in mine if h.status == "queued"), key=lambda h: h.created_at)
    return QueueView(
        running=[h.session_id for h in mine if h.status == "running"],
        queued=[h.session_id for h in waiting],
        workers=host.pool.workers(),
    )


def _token(info: object) -> TokenView:
    return TokenView.model_validate(info, from_attributes=True)
