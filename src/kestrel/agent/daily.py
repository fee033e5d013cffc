"""The daily budget: what every session spent since local midnight, checked before each call.

The spend is read from the event log (through a `SpendMeter`) before every model call, so
sessions running side by side each see the others' spend as of their latest completed call.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Set
from dataclasses import dataclass

from kestrel.agent.budgets import WARN_FRACTION, BudgetExceeded, reached
from kestrel.agent.ports import SpendMeter
from kestrel.protocol.events import BudgetKind, BudgetWarning
from kestrel.store.base import Spend

_SETTING: dict[BudgetKind, str] = {
    "cost_per_day": "limits.max_cost_usd_per_day (KESTREL_MAX_COST_USD_PER_DAY)",
    "tokens_per_day": "limits.max_tokens_per_day (KESTREL_MAX_TOKENS_PER_DAY)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DailyLimits:
    """Budgets over every session of one local day; `None` means unlimited."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    @property
    def any(self) -> bool:
        """Whether any daily budget is set."""
        return self.max_cost_usd is not None or self.max_tokens is not None


def local_midnight(now: float) -> float:
    """The start of the local day that `now` (epoch seconds) falls in."""
    day = dt.datetime.fromtimestamp(now).date()
    return dt.datetime.combine(day, dt.time()).timestamp()


@dataclass(frozen=True, slots=True)
class DailyBudget:
    """The day's budgets and where to read the day's spend."""

    limits: DailyLimits
    meter: SpendMeter
    clock: Callable[[], float] = time.time

    def spent(self) -> Spend:
        """Every session's spend since local midnight, as the log holds it now."""
        return self.meter.spent_since(local_midnight(self.clock()))

    def _usage(self, spent: Spend) -> list[tuple[BudgetKind, float, float | None]]:
        return [
            ("cost_per_day", spent.cost_usd, self.limits.max_cost_usd),
            ("tokens_per_day", spent.tokens, self.limits.max_tokens),
        ]

    def exceeded(self, spent: Spend) -> BudgetExceeded | None:
        """The first daily budget that is spent, with how to raise it."""
        for budget, used, limit in self._usage(spent):
            if limit is not None and reached(used, limit):
                amount = (
                    f"${used:.4f} of ${limit:g}"
                    if budget == "cost_per_day"
                    else f"{used:g} of {limit:g} tokens"
                )
                return BudgetExceeded(
                    budget=budget,
                    detail=f"daily {budget.removesuffix('_per_day')} budget spent: {amount} "
                    "across today's sessions (since local midnight); raise "
                    f"{_SETTING[budget]} or wait until midnight",
                )
        return None

    def warnings(self, spent: Spend, already: Set[str]) -> list[BudgetWarning]:
        """Warnings for daily budgets past `WARN_FRACTION` not yet warned about."""
        return [
            BudgetWarning(budget=budget, used=used, limit=limit)
            for budget, used, limit in self._usage(spent)
            if limit is not None
            and budget not in already
            and reached(used, WARN_FRACTION * limit)
            and not reached(used, limit)
        ]
