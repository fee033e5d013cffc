"""Plan mode: when a run stops for a proposed plan, and how the person's decision is logged.

A frontend asks the person (or takes the decision from the command line), then calls
`record_decision`; the message it returns goes to the model as the person's next message, so the
session continues following the approved plan, or plans again after a rejection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kestrel.agent.state import SessionState
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    Event,
    PermissionMode,
    PlanDecided,
    PlanProposed,
    PlanStep,
    Record,
    TodoItem,
    TodoUpdated,
)
from kestrel.protocol.messages import ToolCall
from kestrel.tools.plan import PlanInvalid, in_order, plan_problems, plan_text

PLAN_MODE_NOTE = (
    "Plan mode: explore the repository read-only (edits and commands are refused). When you "
    "know enough, call propose_plan with the steps: the files each one changes, the checks "
    "that show it worked, and what it depends on. Nothing is changed until the person approves "
    "the plan."
)
"""What the model is told when a session starts in plan mode."""


class PlanNotFound(KestrelError):
    """The session has no plan waiting for a decision, or not the one named."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Approve:
    """Approve the waiting plan, or the person's edit of it, and continue in `mode`."""

    mode: PermissionMode
    steps: tuple[PlanStep, ...] | None = None
    """The edited steps; None approves the plan as proposed."""
    summary: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reject:
    """Reject the waiting plan; the reason goes back to the model for a new proposal."""

    reason: str


def proposed_in(
    state: SessionState, finished: Sequence[tuple[ToolCall, str]]
) -> PlanProposed | None:
    """The plan one of the calls just finished proposed, if it still waits for a decision."""
    plan = state.plan
    if plan is None or not any(call.id == plan.call_id for call, _ in finished):
        return None
    return plan


def mode_after_plan(chosen: PermissionMode | None, configured: PermissionMode) -> PermissionMode:
    """The mode a session continues in once its plan is approved; never plan mode itself."""
    mode = chosen or configured
    return "default" if mode == "plan" else mode


def waiting_plan(state: SessionState, plan_id: str | None = None) -> PlanProposed:
    """The plan waiting for a decision (matching `plan_id` or a prefix of it, when given)."""
    plan = state.plan
    if plan is None:
        raise PlanNotFound(f"session {state.session_id} has no plan waiting for a decision")
    if plan_id and not plan.plan_id.startswith(plan_id):
        raise PlanNotFound(
            f"session {state.session_id}: the plan waiting for a decision is {plan.plan_id}, "
            f"not {plan_id}"
        )
    return plan


def record_decision(
    state: SessionState,
    emit: Callable[[Event], Record],
    decision: Approve | Reject,
    plan_id: str | None = None,
) -> str:
    """Log the person's decision on the waiting plan; return what the model is told next.

    An approval also makes the steps the session's task list, in an order that respects their
    dependencies. An edited plan that cannot be followed raises `PlanInvalid` and logs nothing.
    """
    plan = waiting_plan(state, plan_id)
    if isinstance(decision, Reject):
        reason = decision.reason.strip() or "no reason given"
        emit(PlanDecided(plan_id=plan.plan_id, decision="rejected", reason=reason))
        return (
            f"The person rejected plan {plan.plan_id}: {reason}\n\n"
            "You are still in plan mode. Take this into account, explore more if you need to, "
            "and propose a new plan with propose_plan."
        )
    steps = plan.steps if decision.steps is None else decision.steps
    summary = plan.summary if decision.summary is None else decision.summary
    if problems := plan_problems(steps):
        raise PlanInvalid("\n".join(f"- {p}" for p in problems))
    edited = steps != plan.steps or summary != plan.summary
    emit(
        PlanDecided(
            plan_id=plan.plan_id,
            decision="approved",
            steps=steps,
            edited=edited,
            permission_mode=decision.mode,
        )
    )
    ordered = in_order(steps)
    emit(TodoUpdated(items=tuple(TodoItem(id=s.id, text=s.title) for s in ordered), source="plan"))
    how = " after editing it" if edited else ""
    return (
        f"The person approved plan {plan.plan_id}{how}. Plan mode is over: you are now in "
        f"{decision.mode} mode and may change files as the plan says. Carry out the steps in "
        "this order. Before starting a step, mark it in_progress with the todo tool; once its "
        "checks pass, mark it done.\n\n"
        f"The approved plan:\n{plan_text(summary, ordered)}"
    )
