"""What every route depends on: the hosted mode, and who calls (an API token, else 401; past
the plan's request rate, 429)."""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from kestrel.server.accounts import Principal
from kestrel.server.hosting import Hosting, Refusal
from kestrel.server.rate_limit import check_rate, limiter_of

_bearer = HTTPBearer(auto_error=False)


class ErrorDetail(BaseModel):
    """What went wrong, for a program (`code`) and for a person (`message`)."""

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error answer's body."""

    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "Bad input: a repository source, a plan or a review that cannot be used."),
        (401, "No API token, or one that is unknown or revoked."),
        (403, "The tenant's plan does not allow it (a model, say)."),
        (404, "No such session for this tenant."),
        (409, "The session's state does not allow it now (it runs, say)."),
        (413, "The request body is too large."),
        (422, "The request does not match the schema."),
        (429, "A limit of the tenant's plan is reached; see Retry-After."),
    )
}
"""The error answers every route may give, for the OpenAPI schema."""


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
    hosting = hosting_of(request)
    found = hosting.accounts.authenticate(credentials.credentials)
    if found is None:
        raise Refusal(401, "the API token is not valid (unknown or revoked)")
    check_rate(hosting, found, limiter_of(request.app.state, os.environ))
    return found


Caller = Annotated[Principal, Depends(principal)]
Host = Annotated[Hosting, Depends(hosting_of)]
