"""What is new on a pull request's review, as one follow-up message for its session.

New are the review comments that start a thread and were not sent before, and the failed checks
of the pull request's head commit that were not reported while it was the head: a check that
failed once is sent once, not again at every look until a fix is pushed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kestrel.delivery.branch import DeliveryError
from kestrel.delivery.forge import CheckRun, Forge, ReviewComment
from kestrel.protocol.events import Event, PullRequestOpened, PullRequestSynced

FAILED = ("failure", "timed_out", "cancelled", "action_required")


@dataclass(frozen=True, slots=True)
class Feedback:
    """New review comments and failed checks of pull request `number`."""

    number: int
    comments: tuple[ReviewComment, ...]
    failed: tuple[CheckRun, ...]

    def message(self) -> str:
        """The follow-up the session gets."""
        return follow_up_text(self.comments, self.failed)


def opened_pull(events: Sequence[Event]) -> PullRequestOpened | None:
    """The session's pull request, if it has one."""
    found = [e for e in events if isinstance(e, PullRequestOpened)]
    return found[-1] if found else None


def new_feedback(events: Sequence[Event], forge: Forge) -> Feedback | None:
    """What the forge has that the session was not sent yet; None when nothing is new."""
    opened = opened_pull(events)
    if opened is None:
        raise DeliveryError("the session has no pull request; open one first")
    seen = {c for e in events if isinstance(e, PullRequestSynced) for c in e.comments}
    comments = tuple(c for c in forge.review_comments(opened.number) if _new(c, seen))
    head = forge.pull(opened.number).head_sha
    reported = reported_checks(events, head)
    failed = tuple(
        run
        for run in forge.check_runs(head)
        if run.conclusion in FAILED and run.name not in reported
    )
    if not comments and not failed:
        return None
    return Feedback(opened.number, comments, failed)


def reported_checks(events: Sequence[Event], head_sha: str) -> set[str]:
    """The failed checks already sent while `head_sha` was the pull request's head (the head
    is the last commit Kestrel pushed before each sync)."""
    head = ""
    reported: set[str] = set()
    for event in events:
        if isinstance(event, PullRequestOpened):
            head = event.commit
        elif isinstance(event, PullRequestSynced):
            if head == head_sha:
                reported.update(event.failed_checks)
            head = event.commit or head
    return reported


def follow_up_text(comments: Sequence[ReviewComment], failed: Sequence[CheckRun]) -> str:
    """The message the session gets: each comment with its file and line, each failed check."""
    lines = ["The pull request got review feedback. Address it, then say what you changed."]
    if comments:
        lines.append("\nReview comments:")
        for c in comments:
            where = f"{c.path}:{c.line}" if c.line else c.path or "on the whole change"
            lines.append(f"- {where} ({c.author}): {c.body.strip()}")
    if failed:
        lines.append("\nFailed checks:")
        lines += [f"- {run.name}: {run.conclusion}. {run.summary.strip()[:500]}" for run in failed]
    return "\n".join(lines)


def _new(comment: ReviewComment, seen: set[int]) -> bool:
    return comment.id not in seen and comment.in_reply_to is None and bool(comment.body.strip())
