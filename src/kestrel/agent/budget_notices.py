"""Budgets that cannot be enforced as set, said once per session as `budget_notice` events.

A cost budget on a model with no known price counts nothing, so it can never stop the session;
a token budget on a server that reports no usage counts Kestrel's estimate instead. Both are
said when they become known (the price table at the start, the missing usage after the first
reply), once per budget, so the person is not left believing a budget guards them.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from kestrel.agent.daily import DailyLimits
from kestrel.models.pricing import find_price
from kestrel.protocol.events import BudgetKind, BudgetNotice, Limits
from kestrel.protocol.messages import Usage

PRICED_PROVIDERS = frozenset({"anthropic", "openai"})
"""Providers whose calls are priced from the price table (a scripted model prices itself)."""
NO_PRICE_HELP = (
    "Kestrel's built-in price table has no entry for it, and prices cannot be set in settings"
)


def unpriced(model: str) -> bool:
    """Whether `model` (`provider:model-id`) is served by a priced provider but has no price."""
    provider, _, model_id = model.partition(":")
    return provider in PRICED_PROVIDERS and find_price(model_id) is None


def _cost_notices(
    limits: Limits, daily: DailyLimits | None, model: str, said: Set[str]
) -> list[BudgetNotice]:
    why = f"no price is known for {model} ({NO_PRICE_HELP}), so its calls count as $0"
    found = []
    if limits.max_cost_usd is not None and "cost" not in said:
        detail = (
            f"the cost budget cannot be enforced: {why}; a token budget "
            "(limits.max_tokens, KESTREL_MAX_TOKENS) can"
        )
        found.append(BudgetNotice(budget="cost", enforced=False, detail=detail))
    if daily is not None and daily.max_cost_usd is not None and "cost_per_day" not in said:
        detail = (
            f"the daily cost budget cannot be enforced for this session: {why}; "
            "limits.max_tokens_per_day can"
        )
        found.append(BudgetNotice(budget="cost_per_day", enforced=False, detail=detail))
    return found


def _token_notices(
    limits: Limits, daily: DailyLimits | None, model: str, said: Set[str]
) -> list[BudgetNotice]:
    why = (
        f"the server for {model} reports no token usage, so Kestrel estimates the tokens "
        "from the text it sends and receives"
    )
    per_day = daily.max_tokens if daily is not None else None
    wanted: list[tuple[BudgetKind, bool, str]] = [
        ("tokens", limits.max_tokens is not None, "the token budget"),
        ("tokens_per_day", per_day is not None, "the daily token budget"),
    ]
    return [
        BudgetNotice(budget=budget, enforced=True, detail=f"{name} counts estimates: {why}")
        for budget, is_set, name in wanted
        if is_set and budget not in said
    ]


def at_start(
    limits: Limits, daily: DailyLimits | None, models: Iterable[str], said: Set[str]
) -> list[BudgetNotice]:
    """Notices for the cost budgets when one of `models` (the session's, by role) has no price."""
    missing = [model for model in dict.fromkeys(models) if unpriced(model)]
    return _cost_notices(limits, daily, missing[0], said) if missing else []


def after_call(
    limits: Limits, daily: DailyLimits | None, usage: Usage, said: Set[str]
) -> list[BudgetNotice]:
    """Notices that one call's usage reveals: no price for its model, or no usage reported."""
    found = []
    if not usage.priced:
        found += _cost_notices(limits, daily, usage.model, said)
    if not usage.tokens_reported:
        found += _token_notices(limits, daily, usage.model, said)
    return found
