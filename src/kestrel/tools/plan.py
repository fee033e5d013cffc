"""The `propose_plan` tool, and the checks a plan passes whether the model or a person wrote it.

A plan is a list of steps, each with the files it touches, the checks that show it worked and
the steps it depends on. A dependency on a step that does not exist, or a cycle, is an error the
model is told about so it can send a corrected plan.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kestrel.protocol.events import PlanProposed, PlanStep
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.registry import describe_errors

MAX_STEPS = 50


class StepArgs(BaseModel):
    """One step, as the model (or a person editing the plan) writes it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=40, description="Short id, unique in the plan.")
    title: str = Field(min_length=1, max_length=300, description="What the step does.")
    files: list[str] = Field(default_factory=list, description="Files the step will change.")
    checks: list[str] = Field(
        default_factory=list, description="Commands or tests that show the step worked."
    )
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of the steps that must be done first."
    )


class ProposePlanArgs(BaseModel):
    """Arguments of `propose_plan`."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(default="", max_length=2000, description="The approach, briefly.")
    steps: list[StepArgs] = Field(
        min_length=1, max_length=MAX_STEPS, description="The steps, in the order to do them."
    )


class PlanInvalid(ValueError):
    """A plan that cannot be used; the message lists every problem, one per line."""


def to_steps(steps: Sequence[StepArgs]) -> tuple[PlanStep, ...]:
    """Validated arguments as protocol steps, with surrounding blanks trimmed."""
    return tuple(
        PlanStep(
            id=s.id.strip(),
            title=" ".join(s.title.split()),
            files=tuple(f.strip() for f in s.files if f.strip()),
            checks=tuple(c.strip() for c in s.checks if c.strip()),
            depends_on=tuple(d.strip() for d in s.depends_on),
        )
        for s in steps
    )


def plan_problems(steps: Sequence[PlanStep]) -> list[str]:
    """What is wrong with a plan, one sentence each; empty when it can be followed."""
    problems: list[str] = []
    ids: set[str] = set()
    for step in steps:
        if not step.id:
            problems.append("a step has a blank id")
        elif step.id in ids:
            problems.append(f"step id {step.id!r} is used more than once; ids must be unique")
        ids.add(step.id)
        if not step.title:
            problems.append(f"step {step.id!r} has a blank title")
    for step in steps:
        for dep in step.depends_on:
            if dep == step.id:
                problems.append(f"step {step.id!r} depends on itself")
            elif dep not in ids:
                known = ", ".join(repr(s.id) for s in steps)
                problems.append(
                    f"step {step.id!r} depends on {dep!r}, which is not a step of this plan "
                    f"(its steps are {known})"
                )
    if not problems and (cycle := find_cycle(steps)):
        problems.append(
            "steps depend on each other in a cycle: "
            + " -> ".join(repr(i) for i in cycle)
            + "; no order could satisfy them"
        )
    return problems


def find_cycle(steps: Sequence[PlanStep]) -> list[str]:
    """A dependency cycle as a list of ids that starts and ends with the same id, or []."""
    needs = {s.id: s.depends_on for s in steps}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for dep in needs.get(node, ()):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return []

    for step in steps:
        if step.id not in state and (found := visit(step.id)):
            return found
    return []


def in_order(steps: Sequence[PlanStep]) -> tuple[PlanStep, ...]:
    """The steps with every step after those it depends on, otherwise in the order given."""
    done: set[str] = set()
    ordered: list[PlanStep] = []
    rest = list(steps)
    while rest:
        ready = next((s for s in rest if all(d in done for d in s.depends_on)), rest[0])
        rest.remove(ready)
        ordered.append(ready)
        done.add(ready.id)
    return tuple(ordered)


def parse_plan(data: object) -> tuple[str, tuple[PlanStep, ...]]:
    """A plan a person wrote or edited: `{"summary": ..., "steps": [...]}` or a bare list of
    steps. Raises `PlanInvalid` saying what to fix."""
    if isinstance(data, list):
        data = {"steps": data}
    try:
        args = ProposePlanArgs.model_validate(data)
    except ValidationError as exc:
        raise PlanInvalid(describe_errors("the plan", exc.errors())) from None
    steps = to_steps(args.steps)
    if problems := plan_problems(steps):
        raise PlanInvalid("\n".join(f"- {p}" for p in problems))
    return args.summary.strip(), steps


def plan_text(summary: str, steps: Sequence[PlanStep]) -> str:
    """The plan as text for a person or the model: one numbered entry per step."""
    lines = [summary.strip()] if summary.strip() else []
    for n, step in enumerate(steps, 1):
        lines.append(f"{n}. [{step.id}] {step.title}")
        if step.files:
            lines.append(f"   files: {', '.join(step.files)}")
        if step.checks:
            lines.append(f"   checks: {'; '.join(step.checks)}")
        if step.depends_on:
            lines.append(f"   after: {', '.join(step.depends_on)}")
    return "\n".join(lines)


class ProposePlan:
    """Submit a plan for the person to approve, edit or reject."""

    name: ClassVar[str] = "propose_plan"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = ProposePlanArgs
    description: ClassVar[str] = (
        "In plan mode, once you have explored enough, propose how to do the task: a short "
        "summary and the steps, each with an id, a title, the files it will change, the checks "
        "(commands or tests) that show it worked, and the ids of the steps it depends on. The "
        "person then approves, edits or rejects it; end your turn after proposing."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Check the plan and record the proposal."""
        a = ProposePlanArgs.model_validate(args)
        steps = to_steps(a.steps)
        problems = plan_problems(steps)
        if problems:
            raise ToolFailed(
                "the plan was not proposed:\n"
                + "\n".join(f"- {p}" for p in problems)
                + "\nFix these and call propose_plan again with the whole plan."
            )
        plan_id = uuid.uuid4().hex[:8]
        proposed = PlanProposed(
            plan_id=plan_id, summary=a.summary.strip(), steps=steps, call_id=ctx.call_id or None
        )
        count = f"{len(steps)} step{'s' if len(steps) != 1 else ''}"
        return ToolOutcome(
            content=f"Plan {plan_id} ({count}) was submitted for review. End your turn now "
            "without calling more tools; you will be told whether the person approved, edited "
            "or rejected it.",
            events=(proposed,),
        )
