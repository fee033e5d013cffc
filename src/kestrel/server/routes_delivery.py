"""Routes for a session's pull request: open it, see it and its review rounds, sync its review.

The server delivers with its own forge token (see `pull_requests`); a tenant only names the
base, the branch and whether it is a draft. Another tenant's session answers 404.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from kestrel.delivery.feedback import opened_pull
from kestrel.protocol.events import PullRequestSynced
from kestrel.server.deps import ERRORS, Caller, ErrorBody, Host
from kestrel.server.hosting import Hosting, Refusal
from kestrel.server.pull_requests import OpenRequest, PullRequests
from kestrel.server.routes_sessions import Strict

_MORE_ERRORS: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorBody, "description": "The forge refused or failed a call."},
    503: {
        "model": ErrorBody,
        "description": "The server has no forge token, or cannot use its storage now.",
    },
}
router = APIRouter(responses={**ERRORS, **_MORE_ERRORS})


def pulls_of(request: Request) -> PullRequests:
    """The server's pull requests and their sync job."""
    pulls: PullRequests = request.app.state.pulls
    return pulls


Pulls = Annotated[PullRequests, Depends(pulls_of)]


class OpenPullBody(Strict):
    """The pull request to open for the session's change."""

    base: str | None = Field(
        default=None, min_length=1, max_length=255, description="default: the checkout's branch"
    )
    branch: str | None = Field(
        default=None,
        max_length=200,
        description="`kestrel/NAME`; default: named from the task and the session",
    )
    draft: bool = False
    accept_security_findings: bool = Field(
        default=False,
        description="Push even a change the security gate blocks (a secret, a high-severity "
        "finding); the person's decision.",
    )


class RoundView(BaseModel):
    """One round of the review: what was sent to the session, pushed and answered."""

    comments: list[int]
    failed_checks: list[str]
    commit: str
    """The fix pushed; empty when the follow-up changed nothing."""
    replied: list[int]
    proposed: list[str]
    """Comments that state a convention, which `POST .../memory/accept` keeps."""


class PullRequestView(BaseModel):
    """A session's pull request, and how its review went."""

    number: int
    url: str
    repository: str
    branch: str
    base: str
    draft: bool
    head: str
    """The last commit pushed to the branch."""
    open: bool
    """False once the forge said it was closed or merged."""
    following_up: bool
    """A follow-up for the review runs (or waits to); its fix is pushed when it ends."""
    last_error: str | None
    """Why the last round failed; the periodic sync leaves it alone until a sync is asked."""
    rounds: list[RoundView]


class SyncView(BaseModel):
    """What a sync did."""

    state: Literal["nothing_new", "following_up"]
    comments: int
    failed_checks: list[str]
    message: str
    """The follow-up sent to the session; empty when nothing was new."""


_SYNC: dict[int | str, dict[str, Any]] = {
    202: {"model": SyncView, "description": "New feedback was sent to the session."}
}


@router.post("/sessions/{session_id}/pull-request", status_code=201)
def open_pull_request(
    session_id: str, body: OpenPullBody, who: Caller, host: Host, pulls: Pulls
) -> PullRequestView:
    """Commit the session's change on a branch, pass it through the security gate, push it to
    the repository the session was cloned from and open a pull request whose description is
    written from the session's log (409 when the gate refuses it or the session runs)."""
    pulls.open(who, session_id, OpenRequest(**body.model_dump()))
    return _view(host, pulls, who.tenant_id, session_id)


@router.get("/sessions/{session_id}/pull-request")
def pull_request(session_id: str, who: Caller, host: Host, pulls: Pulls) -> PullRequestView:
    """The session's pull request and its review rounds (404 when it has none)."""
    pulls.watched(who, session_id)
    return _view(host, pulls, who.tenant_id, session_id)


@router.post("/sessions/{session_id}/pull-request/sync", responses=_SYNC)
def sync_pull_request(session_id: str, who: Caller, pulls: Pulls, response: Response) -> SyncView:
    """Look at the review now: new review comments and failed checks become one follow-up
    (202), run like any follow-up; when it ends, the fix is pushed and each comment answered,
    and the log records `pull_request_synced`. 200 when nothing is new."""
    outcome = pulls.sync(who, session_id)
    feedback = outcome.feedback
    response.status_code = 202 if outcome.state == "following_up" else 200
    return SyncView(
        state=outcome.state,
        comments=len(feedback.comments) if feedback else 0,
        failed_checks=[run.name for run in feedback.failed] if feedback else [],
        message=feedback.message() if feedback else "",
    )


def _view(host: Hosting, pulls: PullRequests, tenant_id: str, session_id: str) -> PullRequestView:
    events = [record.event for record in host.store.read(session_id)]
    opened = opened_pull(events)
    watched = pulls.pulls.get(tenant_id, session_id)
    if opened is None or watched is None:
        raise Refusal(404, f"session {session_id} has no pull request")
    synced = [e for e in events if isinstance(e, PullRequestSynced)]
    pushed = [e.commit for e in synced if e.commit]
    return PullRequestView(
        number=opened.number,
        url=opened.url,
        repository=opened.repository,
        branch=opened.branch,
        base=opened.base,
        draft=opened.draft,
        head=pushed[-1] if pushed else opened.commit,
        open=watched.open,
        following_up=watched.round is not None,
        last_error=watched.error or None,
        rounds=[
            RoundView(
                comments=list(e.comments),
                failed_checks=list(e.failed_checks),
                commit=e.commit,
                replied=list(e.replied),
                proposed=list(e.proposed),
            )
            for e in synced
        ],
    )
