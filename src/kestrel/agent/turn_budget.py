"""The turn budget, and the grace a run that is still changing files gets past it.

Real long tasks run longer than short ones by a wide margin (of 500 recorded runs of a strong
model on real repository tasks, the longest took 145 steps), so a fixed stop may cut a run that is
about to finish. When the turn budget is spent while the files changed in the last
`PROGRESS_TURNS` turns, the session says so (`budget_notice` for `turns`) and goes on, once, for
up to `grace` more of the budget; a run whose files stood still that long stops at the budget.
"""

from __future__ import annotations

import math
from collections.abc import Set
from dataclasses import replace

from kestrel.agent.turn_marks import TurnMarks
from kestrel.protocol.events import BudgetNotice, Limits, Totals

PROGRESS_TURNS = 10
"""A run is progressing when its files changed within this many of its latest turns."""


def extra_turns(max_turns: int, grace: float) -> int:
    """How many turns the grace adds to a budget of `max_turns` (at least one when any)."""
    return math.ceil(max_turns * grace) if grace > 0 else 0


def in_force(limits: Limits, grace: float, noted: Set[str]) -> Limits:
    """The budgets as they stand: the turn budget grown by its grace once that was given."""
    if "turns" not in noted or limits.max_turns is None:
        return limits
    return replace(limits, max_turns=limits.max_turns + extra_turns(limits.max_turns, grace))


def progressing(marks: TurnMarks, turns: int = PROGRESS_TURNS) -> bool:
    """Whether the files changed within the latest `turns` turns."""
    recent = list(marks.before.values())[-turns:]
    if not recent:
        return False
    return len({mark.files for mark in recent} | {marks.files_key}) > 1


def grace_notice(
    limits: Limits, totals: Totals, grace: float, marks: TurnMarks, noted: Set[str]
) -> BudgetNotice | None:
    """The notice that gives a progressing run its grace, when the turn budget is spent now."""
    budget = limits.max_turns
    extra = extra_turns(budget, grace) if budget is not None else 0
    if budget is None or extra == 0 or "turns" in noted or totals.turns < budget:
        return None
    if not progressing(marks):
        return None
    return BudgetNotice(
        budget="turns",
        enforced=True,
        detail=(
            f"the turn budget of {budget} is spent, but the files changed in the last "
            f"{PROGRESS_TURNS} turns: going on for up to {extra} more turns "
            "(limits.turn_grace; 0 makes the budget a hard stop)"
        ),
    )
