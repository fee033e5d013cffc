"""Budgets on turns, tokens, dollars and wall time: warn at a threshold, stop at the limit."""

from __future__ import annotations

import math
from collections.abc import Set
from dataclasses import dataclass

from kestrel.protocol.events import BudgetKind, BudgetWarning, Limits, Totals

WARN_FRACTION = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded:
    """A budget is spent: which one, and a sentence for the person."""

    budget: BudgetKind
    detail: str


def reached(used: float, limit: float) -> bool:
    """`used >= limit`, forgiving the rounding of summed dollar amounts (0.1 + 0.2 < 0.3)."""
    return used >= limit or math.isclose(used, limit, rel_tol=1e-9, abs_tol=1e-12)


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
        if limit is not None and reached(used, limit):
            return BudgetExceeded(
                budget=budget, detail=f"{budget} budget spent: {used:g} of {limit:g}"
            )
    return None


def warnings(limits: Limits, totals: Totals, already: Set[str]) -> list[BudgetWarning]:
    """Warnings for budgets past `WARN_FRACTION` that have not been warned about yet."""
    return [
        BudgetWarning(budget=budget, used=used, limit=limit)
        for budget, used, limit in _usage(limits, totals)
        if limit is not None
        and budget not in already
        and reached(used, WARN_FRACTION * limit)
        and not reached(used, limit)
    ]
