"""What follows a step, and the commands on a session at rest: the plan it stopped for, the
change it left, apply, discard, rewind.

Decisions are written through the service (`decide_plan`, the hand-off of the change), so the
log says who decided what, exactly as when the line-mode command or another process decides.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from kestrel import app_workspace
from kestrel.agent.planning import Approve, Reject, mode_after_plan
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import (
    ChangesReady,
    CheckpointCreated,
    PlanProposed,
    PlanStep,
    Record,
    Rewound,
    SessionFinished,
)
from kestrel.service import review, sessions
from kestrel.service.decisions import decide_plan
from kestrel.tools.plan import PlanInvalid, parse_plan
from kestrel.tui.driver import SessionDriver, StepEnd


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanAnswer:
    """The person's decision on a plan: approve (perhaps edited) or reject with a reason."""

    approve: bool
    edited: str | None = None
    """The plan as the person edited it (JSON text); None: as proposed."""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeAnswer:
    """The person's decision on a change: apply it, look later, or reject it with feedback."""

    action: Literal["apply", "later", "reject"]
    feedback: str = ""


class Reviewer(Protocol):
    """Asks the person (the view's dialogs)."""

    async def plan(self, plan: PlanProposed) -> PlanAnswer | None:
        """Approve, edit or reject; None leaves the plan waiting."""

    async def change(self, ready: ChangesReady, diff: str) -> ChangeAnswer:
        """Apply, later, or reject with feedback."""


def parse_edited(text: str) -> tuple[str, tuple[PlanStep, ...]]:
    """The summary and steps of an edited plan; `ConfigError` saying what to fix."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"line {exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return parse_plan(data)
    except PlanInvalid as exc:
        raise ConfigError(f"the plan cannot be used:\n{exc}") from None


def decide(driver: SessionDriver, answer: PlanAnswer) -> str:
    """Log the decision on the waiting plan through the service; what the model is told."""
    assert driver.session_id is not None
    decision: Approve | Reject
    if answer.approve:
        mode = mode_after_plan(driver.options.permission_mode, driver.settings.permission_mode)
        summary, steps = parse_edited(answer.edited) if answer.edited else (None, None)
        decision = Approve(mode=mode, summary=summary, steps=steps)
    else:
        decision = Reject(reason=answer.reason)
    message = decide_plan(driver.store, driver.session_id, decision)
    driver.refresh()
    if isinstance(decision, Approve):
        driver.mode = decision.mode
        driver.apply_mode()
    return message


def rejecting(driver: SessionDriver) -> Callable[[str], str]:
    """A message sent while a plan waits rejects the plan, with the message as the reason."""

    def reject(text: str) -> str:
        return decide(driver, PlanAnswer(approve=False, reason=text))

    return reject


def after_step(driver: SessionDriver, reviewer: Reviewer) -> StepEnd:
    """What follows each step: the plan it stopped for is decided, the change it finished
    with is offered for review (applied unasked where the mode edits unasked)."""

    async def next_message(finished: SessionFinished) -> str | None:
        run = driver.run
        if run is None:
            return None
        plan = run.loop.state.plan
        if finished.reason == "plan" and plan is not None:
            answer = await reviewer.plan(plan)
            if answer is None:
                driver.view.notice("The plan waits: your next message rejects it and says why.")
                return None
            return decide(driver, answer)
        if finished.reason == "done" and run.view is not None:
            return await hand_over(driver, reviewer)
        return None

    return next_message


async def hand_over(driver: SessionDriver, reviewer: Reviewer | None) -> str | None:
    """Announce the change and apply it when the person (or the mode) says so; the person's
    feedback on a rejected change is the next message."""
    run = await driver.open()
    assert run.view is not None and driver.session_id is not None
    loop, sid = run.loop, driver.session_id
    mode = loop.config.permission_mode or loop.state.permission_mode
    feedback: list[str] = []

    async def decide_change(ready: ChangesReady) -> bool:
        if reviewer is None or mode in ("accept-edits", "bypass"):
            return True
        if driver.queue:
            return False  # More work was asked for: review the change after it.
        _, pending = await asyncio.to_thread(review.pending_diff, driver.store, sid)
        answer = await reviewer.change(ready, pending.diff if pending else "")
        if answer.action == "reject":
            feedback.append(answer.feedback or "The person rejected this change.")
        return answer.action == "apply"

    handoff = await app_workspace.hand_off(
        driver.store, sid, run.settings, run.view, emit=loop.emit, decide=decide_change
    )
    if handoff.applied is not None and handoff.applied.outcome == "applied":
        driver.run = None  # The overlay was taken off; the next step opens a fresh one.
    if handoff.ready is None and reviewer is None:
        driver.view.notice("No change waits for review.")
    return "\n".join(feedback) or None


async def discard(driver: SessionDriver) -> None:
    """Drop the session's waiting change and its overlay."""
    run = await driver.open()
    if run.view is None or driver.session_id is None:
        driver.view.notice("This session edits the checkout directly: nothing to discard.")
        return
    dropped = await asyncio.to_thread(
        app_workspace.discard, driver.store, driver.session_id, run.settings, run.view
    )
    driver.run = None
    if dropped is None:
        driver.view.notice("No change waited; the overlay was dropped.")


async def rewind(driver: SessionDriver, checkpoint_id: str) -> Rewound:
    """Restore the files of a checkpoint; the conversation goes on from there."""
    run = await driver.open()
    return await asyncio.to_thread(sessions.rewind_to, run.loop, checkpoint_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A checkpoint a rewind may go back to, as the picker lists it."""

    checkpoint_id: str
    label: str
    seq: int
    files: tuple[str, ...]


def checkpoints_in(records: Sequence[Record]) -> list[Checkpoint]:
    """The session's checkpoints, newest first, with the files each one changed."""
    found = [
        Checkpoint(
            checkpoint_id=r.event.checkpoint_id,
            label=r.event.label,
            seq=r.seq,
            files=tuple(f"{c.status} {c.path}" for c in r.event.changes),
        )
        for r in records
        if isinstance(r.event, CheckpointCreated)
    ]
    return found[::-1]
