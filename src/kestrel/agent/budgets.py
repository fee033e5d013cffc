"""Budgets on turns, tokens, dollars and wall time: warn at a threshold, stop at the limit."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from kestrel.protocol.events import BudgetKind, BudgetWarning, Limits, Totals

WARN_FRACTION = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded:
    """A budget is spent: which one, and a sentence for the person."""

    budget: BudgetKind
    detail: str


def _usage(limits: Limits, totals: Totals) -> list[tuple[BudgetKind, float, float | None]]:
    return [
        ("turns", totals.turns, limits.max_turns),
        ("tokens", totals.tokens, limits.max_tokens),
        ("cost", totals.cost_usd, limits.max_cost_usd),
        ("wall_time", totals.wall_s, limits.max_wall_s),
    ]


def exceeded(limits: Limits, totals: Totals) -> BudgetExceeded | None:
    """The first budget that is spent, if any; checked before every model call."""
    for budget, used, limit in _usage(limits, totals):
        if limit is not None and used >= limit:
            return BudgetExceeded(
                budget=budget, detail=f"{budget} budget spent: {used:g} of {limit:g}"
            )
    return None


def warnings(limits: Limits, totals: Totals, already: Set[str]) -> list[BudgetWarning]:
    """Warnings for budgets past `WARN_FRACTION` that have not been warned about yet."""
    return [
        BudgetWarning(budget=budget, used=used, limit=limit)
        for budget, used, limit in _usage(limits, totals)
        if limit is not None and budget not in already and WARN_FRACTION * limit <= used < limit
    ]
