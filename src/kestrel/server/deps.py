"""What every route depends on: the hosted mode, and who calls (an API token, else 401)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from kestrel.server.accounts import Principal
from kestrel.server.hosting import Hosting, Refusal

_bearer = HTTPBearer(auto_error=False)


def hosting_of(request: Request) -> Hosting:
    """The hosted mode the app runs."""
    hosting: Hosting = request.app.state.hosting
    return hosting


def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who calls: a valid, unrevoked API token, else 401."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Refusal(401, "an API token is required: Authorization: Bearer ks_...")
    found = hosting_of(request).accounts.authenticate(credentials.credentials)
    if found is None:
        raise Refusal(401, "the API token is not valid (unknown or revoked)")
    return found


Caller = Annotated[Principal, Depends(principal)]
Host = Annotated[Hosting, Depends(hosting_of)]
