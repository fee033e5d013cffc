"""Opening a session's pull request, and answering its review: the two things `kestrel pr` does.

Opening: the change is committed on a branch named from the task, pushed, and a pull request
opened with a description written from the session's log. Syncing: new review comments and
failed checks become one follow-up message to the same session; after it ran, its new change is
committed on top and pushed, and each comment gets a reply saying what was done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kestrel import memory_store
from kestrel.app_store import data_dir
from kestrel.delivery import body, branch, gate
from kestrel.delivery.branch import DeliveryError, Remote
from kestrel.delivery.forge import GITHUB_API, CheckRun, GitHub, ReviewComment
from kestrel.protocol.events import Event, PullRequestOpened, PullRequestSynced, SessionFinished
from kestrel.service.change_export import SessionChange, change_patch, session_change
from kestrel.settings import Settings
from kestrel.store.base import EventStore

FAILED = ("failure", "timed_out", "cancelled", "action_required")


@dataclass(frozen=True, slots=True, kw_only=True)
class PullOptions:
    """Where and how the pull request is opened."""

    remote: str = "origin"
    base: str | None = None
    """The branch to merge into; the checkout's current branch when None."""
    branch: str | None = None
    draft: bool = False
    api_url: str = GITHUB_API
    repository: str | None = None
    """`owner/name`; read from the remote's URL when None."""
    accept_security_findings: bool = False
    """Push even what the security gate blocks (the person decided)."""


def forge_host(api_url: str) -> str:
    """The host git pushes go to for the forge at `api_url` (api.github.com: github.com)."""
    host = urlsplit(api_url).hostname or ""
    return "github.com" if host == "api.github.com" else host


def open_pull_request(
    store: EventStore, settings: Settings, session_id: str, options: PullOptions, token: str
) -> PullRequestOpened:
    """Push the session's change and open its pull request; the event recording it."""
    events = [record.event for record in store.read(session_id)]
    opened = _opened(events)
    if opened is not None:
        raise DeliveryError(
            f"session {session_id} already has pull request #{opened.number} ({opened.url}); "
            f"`kestrel pr sync {session_id}` answers its review"
        )
    change = _change(store, settings, session_id)
    patch = change_patch(change)
    checkout = change.checkout
    base_commit, current = branch.head(checkout)
    where = branch.remote(checkout, options.remote)
    name = options.branch or branch.branch_name(change.task, session_id)
    message = body.commit_message(change.task, session_id)
    commit = branch.commit_change(
        checkout, base=base_commit, parent=base_commit, patch=patch, message=message, branch=name
    )
    try:
        gate.refuse_blocking(
            gate.check_commit(checkout, base_commit, commit),
            accepted=options.accept_security_findings,
        )
    except DeliveryError:
        branch.delete_branch(checkout, name)
        raise
    branch.push(checkout, where, name, token=token, forge_host=forge_host(options.api_url))
    repository = options.repository or where.repository()
    forge = GitHub(options.api_url, token, repository)
    try:
        info = forge.open_pull(
            title=body.title(change.task),
            body=body.pull_body(events, branch.numstat(checkout, patch), session_id),
            head=name,
            base=options.base or current or "main",
            draft=options.draft,
        )
    finally:
        forge.close()
    event = PullRequestOpened(
        url=info.url,
        number=info.number,
        repository=repository,
        branch=name,
        base=options.base or current or "main",
        commit=commit,
        draft=options.draft,
    )
    store.append(session_id, event)
    return event


def sync_pull_request(
    store: EventStore,
    settings: Settings,
    session_id: str,
    options: PullOptions,
    token: str,
    follow_up: Callable[[str], None],
) -> PullRequestSynced | None:
    """Send new review comments and failed checks to the session, push its fix and reply;
    None when there was nothing new."""
    events = [record.event for record in store.read(session_id)]
    opened = _opened(events)
    if opened is None:
        raise DeliveryError(f"session {session_id} has no pull request; open one with `kestrel pr`")
    forge = GitHub(options.api_url, token, opened.repository)
    try:
        seen = {c for e in events if isinstance(e, PullRequestSynced) for c in e.comments}
        comments = [c for c in forge.review_comments(opened.number) if _new(c, seen)]
        head_sha = forge.pull(opened.number).head_sha
        failed = [run for run in forge.check_runs(head_sha) if run.conclusion in FAILED]
        if not comments and not failed:
            return None
        follow_up(follow_up_text(comments, failed))
        commit = _push_fix(store, settings, session_id, opened, events, options, token)
        answer = _answer(store, session_id, commit)
        for comment in comments:
            forge.reply(opened.number, comment.id, answer)
        replied = tuple(c.id for c in comments)
    finally:
        forge.close()
    event = PullRequestSynced(
        number=opened.number,
        comments=tuple(c.id for c in comments),
        failed_checks=tuple(run.name for run in failed),
        commit=commit,
        replied=replied,
        proposed=tuple(memory_store.proposals([c.body for c in comments])),
    )
    store.append(session_id, event)
    return event


def follow_up_text(comments: Sequence[ReviewComment], failed: Sequence[CheckRun]) -> str:
    """The message the session gets: each comment with its file and line, each failed check."""
    lines = ["The pull request got review feedback. Address it, then say what you changed."]
    if comments:
        lines.append("\nReview comments:")
        for c in comments:
            where = f"{c.path}:{c.line}" if c.line else c.path
            lines.append(f"- {where} ({c.author}): {c.body.strip()}")
    if failed:
        lines.append("\nFailed checks:")
        lines += [f"- {run.name}: {run.conclusion}. {run.summary.strip()[:500]}" for run in failed]
    return "\n".join(lines)


def _push_fix(
    store: EventStore,
    settings: Settings,
    session_id: str,
    opened: PullRequestOpened,
    events: Sequence[Event],
    options: PullOptions,
    token: str,
) -> str:
    """Commit the session's whole change again on the pull request's base, as a child of the
    last commit pushed; '' when it is the same as that commit's."""
    change = _change(store, settings, session_id)
    checkout = change.checkout
    pushed = [e.commit for e in events if isinstance(e, PullRequestSynced) and e.commit]
    parent = pushed[-1] if pushed else opened.commit
    base = branch.parent_of(checkout, opened.commit)
    message = body.commit_message(change.task, session_id, "Address review feedback.")
    commit = branch.commit_change(
        checkout,
        base=base,
        parent=parent,
        patch=change_patch(change),
        message=message,
        branch=opened.branch,
    )
    if branch.same_tree(checkout, commit, parent):
        branch.reset_branch(checkout, opened.branch, parent)
        return ""
    report = gate.check_commit(checkout, parent, commit)
    try:
        gate.refuse_blocking(report, accepted=options.accept_security_findings)
    except DeliveryError:
        branch.reset_branch(checkout, opened.branch, parent)
        raise
    where: Remote = branch.remote(checkout, options.remote)
    branch.push(checkout, where, opened.branch, token=token, forge_host=forge_host(options.api_url))
    return commit


def _answer(store: EventStore, session_id: str, commit: str) -> str:
    finished = [r.event for r in store.read(session_id) if isinstance(r.event, SessionFinished)]
    said = finished[-1].final_text.strip()[:600] if finished else ""
    done = f"Changed in {commit[:10]}." if commit else "Looked at this; no change was needed."
    return f"{done} {said}".strip() + "\n\n(Kestrel)"


def _new(comment: ReviewComment, seen: set[int]) -> bool:
    return comment.id not in seen and comment.in_reply_to is None and bool(comment.body.strip())


def _opened(events: Sequence[Event]) -> PullRequestOpened | None:
    found = [e for e in events if isinstance(e, PullRequestOpened)]
    return found[-1] if found else None


def _change(store: EventStore, settings: Settings, session_id: str) -> SessionChange:
    change = session_change(store, session_id, data_dir(settings))
    if change.state == "none":
        raise DeliveryError(f"session {session_id} changed no file: there is nothing to deliver")
    if not Path(change.checkout).is_dir():
        raise DeliveryError(f"the session's checkout {change.checkout} is gone")
    return change
