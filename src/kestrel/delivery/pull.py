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

from kestrel import memory_store
from kestrel.app_store import data_dir
from kestrel.delivery import body, branch, gate
from kestrel.delivery.branch import DeliveryError, Remote
from kestrel.delivery.feedback import Feedback, new_feedback, opened_pull
from kestrel.delivery.forge import GITHUB_API, Forge
from kestrel.delivery.forges import forge_host, make_forge
from kestrel.protocol.events import Event, PullRequestOpened, PullRequestSynced, SessionFinished
from kestrel.service.change_export import SessionChange, change_patch, session_change
from kestrel.settings import Settings
from kestrel.store.base import EventStore

__all__ = [
    "PullOptions",
    "answer_feedback",
    "forge_host",
    "open_pull",
    "open_pull_request",
    "sync_pull_request",
]


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
    refusal_advice: str = gate.ADVICE
    """What the person can do when the security gate refuses the push."""


def open_pull_request(
    store: EventStore, settings: Settings, session_id: str, options: PullOptions, token: str
) -> PullRequestOpened:
    """Push the session's change and open its pull request; the event recording it."""
    return open_pull(store, data_dir(settings), session_id, options, token)


def open_pull(
    store: EventStore, data: Path, session_id: str, options: PullOptions, token: str
) -> PullRequestOpened:
    """`open_pull_request` for sessions whose runs keep their data in `data`."""
    events = [record.event for record in store.read(session_id)]
    opened = opened_pull(events)
    if opened is not None:
        raise DeliveryError(
            f"session {session_id} already has pull request #{opened.number} ({opened.url}); "
            f"`kestrel pr sync {session_id}` answers its review"
        )
    change = _change(store, data, session_id)
    patch = change_patch(change)
    checkout = change.checkout
    base_commit, current = branch.head(checkout)
    where = branch.remote(checkout, options.remote)
    name = options.branch or branch.branch_name(change.task, session_id)
    commit = _commit_checked(change, patch, base_commit, name, options)
    branch.push(checkout, where, name, token=token, forge_host=forge_host(options.api_url))
    repository = options.repository or where.repository()
    base = options.base or current or "main"
    forge = make_forge(options.api_url, token, repository)
    try:
        info = forge.open_pull(
            title=body.title(change.task),
            body=body.pull_body(events, branch.numstat(checkout, patch), session_id),
            head=name,
            base=base,
            draft=options.draft,
        )
    finally:
        forge.close()
    event = PullRequestOpened(
        url=info.url,
        number=info.number,
        repository=repository,
        branch=name,
        base=base,
        commit=commit,
        draft=options.draft,
    )
    store.append(session_id, event)
    return event


def _commit_checked(
    change: SessionChange, patch: bytes, base: str, name: str, options: PullOptions
) -> str:
    """Commit the change on `base` as branch `name`, and pass it through the security gate
    (the branch is removed again when the gate refuses it); the commit."""
    checkout = change.checkout
    message = body.commit_message(change.task, change.session_id)
    commit = branch.commit_change(
        checkout, base=base, parent=base, patch=patch, message=message, branch=name
    )
    try:
        gate.refuse_blocking(
            gate.check_commit(checkout, base, commit),
            accepted=options.accept_security_findings,
            advice=options.refusal_advice,
        )
    except DeliveryError:
        branch.delete_branch(checkout, name)
        raise
    return commit


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
    opened = opened_pull(events)
    if opened is None:
        raise DeliveryError(f"session {session_id} has no pull request; open one with `kestrel pr`")
    forge = make_forge(options.api_url, token, opened.repository)
    try:
        feedback = new_feedback(events, forge)
        if feedback is None:
            return None
        follow_up(feedback.message())
        return answer_feedback(
            store, data_dir(settings), session_id, feedback, options, token, forge
        )
    finally:
        forge.close()


def answer_feedback(
    store: EventStore,
    data: Path,
    session_id: str,
    feedback: Feedback,
    options: PullOptions,
    token: str,
    forge: Forge,
) -> PullRequestSynced:
    """After the session ran the follow-up: push its fix, reply to each comment, and record
    the round in the session's log."""
    events = [record.event for record in store.read(session_id)]
    opened = opened_pull(events)
    if opened is None:
        raise DeliveryError(f"session {session_id} has no pull request")
    commit = _push_fix(store, data, session_id, opened, events, options, token)
    answer = _answer(store, session_id, commit)
    for comment in feedback.comments:
        forge.reply(opened.number, comment.id, answer)
    event = PullRequestSynced(
        number=opened.number,
        comments=tuple(c.id for c in feedback.comments),
        failed_checks=tuple(run.name for run in feedback.failed),
        commit=commit,
        replied=tuple(c.id for c in feedback.comments),
        proposed=tuple(memory_store.proposals([c.body for c in feedback.comments])),
    )
    store.append(session_id, event)
    return event


def _push_fix(
    store: EventStore,
    data: Path,
    session_id: str,
    opened: PullRequestOpened,
    events: Sequence[Event],
    options: PullOptions,
    token: str,
) -> str:
    """Commit the session's whole change again on the pull request's base, as a child of the
    last commit pushed; '' when it is the same as that commit's."""
    change = _change(store, data, session_id)
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
        gate.refuse_blocking(
            report, accepted=options.accept_security_findings, advice=options.refusal_advice
        )
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


def _change(store: EventStore, data: Path, session_id: str) -> SessionChange:
    change = session_change(store, session_id, data)
    if change.state == "none":
        raise DeliveryError(f"session {session_id} changed no file: there is nothing to deliver")
    if not Path(change.checkout).is_dir():
        raise DeliveryError(f"the session's checkout {change.checkout} is gone")
    return change
