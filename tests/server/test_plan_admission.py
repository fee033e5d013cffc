"""Plans and admission: every limit refuses with its status, Retry-After and name; bad configs."""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.server.plans import (
    DAY_RETRY_FALLBACK_S,
    DEFAULT_PLANS,
    FREE,
    PRO,
    TEAM,
    Admitted,
    Plan,
    PlanError,
    Refused,
    TenantUsage,
    admit,
    plans_from_mapping,
)

PLAN = Plan(
    name="small",
    tier=0,
    max_concurrent_sessions=2,
    max_queued_sessions=3,
    tokens_per_day=1_000,
    usd_per_day=1.5,
    allowed_models=("anthropic:claude-haiku-*", "openai:gpt-5-mini"),
    max_wall_s=600,
)
MODEL = "anthropic:claude-haiku-4-5"


def usage(**changes: Any) -> TenantUsage:
    """A tenant with nothing running and nothing spent, changed by `changes`."""
    quiet = TenantUsage(running=0, queued=0, tokens_today=0, usd_today=0.0)
    return dataclasses.replace(quiet, **changes)


def refused(decision: Admitted | Refused) -> Refused:
    """The decision, which must be a refusal."""
    assert isinstance(decision, Refused), decision
    return decision


def test_a_quiet_tenant_runs_now() -> None:
    assert admit(PLAN, usage(), model=MODEL) == Admitted(queued=False, max_wall_s=600)


def test_a_tenant_at_its_slots_waits_in_its_queue() -> None:
    decision = admit(PLAN, usage(running=2, queued=2), model=MODEL)
    assert decision == Admitted(queued=True, max_wall_s=600)


def test_a_full_queue_is_a_429_soon() -> None:
    decision = refused(admit(PLAN, usage(running=2, queued=3), model=MODEL))
    assert (decision.status, decision.limit) == (429, "max_queued_sessions")
    assert decision.retry_after_s is not None and decision.retry_after_s >= 1
    assert decision.headers == {"Retry-After": str(decision.retry_after_s)}
    assert "3 queued sessions of plan small" in decision.message


def test_a_plan_without_a_queue_refuses_at_its_slots() -> None:
    plan = dataclasses.replace(PLAN, max_queued_sessions=0)
    decision = refused(admit(plan, usage(running=2), model=MODEL))
    assert (decision.status, decision.limit) == (429, "max_concurrent_sessions")
    assert decision.retry_after_s is not None and decision.retry_after_s >= 1
    assert decision.message == (
        "tenant is at its 2 concurrent sessions of plan small; retry when one finishes"
    )


def test_a_free_slot_admits_even_with_a_full_queue() -> None:
    assert admit(PLAN, usage(running=1, queued=3), model=MODEL) == Admitted(
        queued=False, max_wall_s=600
    )


def test_spent_tokens_wait_for_the_day_to_reset() -> None:
    spent = usage(tokens_today=1_000, seconds_until_day_resets=3_600 * 5 + 0.2)
    decision = refused(admit(PLAN, spent, model=MODEL))
    assert (decision.status, decision.limit) == (429, "tokens_per_day")
    assert decision.retry_after_s == 3_600 * 5 + 1
    assert "1,000 of the 1,000 tokens" in decision.message and "5h 00m" in decision.message


def test_spent_dollars_wait_for_the_day_to_reset() -> None:
    decision = refused(admit(PLAN, usage(usd_today=1.5, seconds_until_day_resets=42), model=MODEL))
    assert (decision.status, decision.limit, decision.retry_after_s) == (429, "usd_per_day", 42)
    assert "$1.50 of the $1.50" in decision.message


@pytest.mark.parametrize("until_reset", [0.0, 0.001])
def test_retry_after_is_at_least_a_second(until_reset: float) -> None:
    spent = usage(usd_today=9.0, seconds_until_day_resets=until_reset)
    assert refused(admit(PLAN, spent, model=MODEL)).retry_after_s == 1


def test_an_unknown_reset_time_falls_back() -> None:
    decision = refused(admit(PLAN, usage(tokens_today=5_000), model=MODEL))
    assert decision.retry_after_s == DAY_RETRY_FALLBACK_S


def test_a_model_outside_the_plan_is_a_403_without_retry() -> None:
    decision = refused(admit(PLAN, usage(), model="anthropic:claude-opus-4-5"))
    assert (decision.status, decision.limit, decision.retry_after_s) == (
        403,
        "allowed_models",
        None,
    )
    assert decision.headers == {}
    assert "claude-opus-4-5" in decision.message


def test_the_model_is_checked_before_anything_that_waiting_fixes() -> None:
    busy = usage(running=2, queued=3, tokens_today=10**9)
    assert refused(admit(PLAN, busy, model="openai:gpt-5")).status == 403


def test_budgets_are_checked_before_slots() -> None:
    busy = usage(running=2, queued=3, usd_today=2.0, seconds_until_day_resets=100)
    assert refused(admit(PLAN, busy, model="openai:gpt-5-mini")).limit == "usd_per_day"


def test_globs_are_case_sensitive_and_an_empty_list_allows_all() -> None:
    assert not PLAN.allows_model("anthropic:CLAUDE-HAIKU-4-5")
    assert PRO.allows_model("anything:at-all")


def test_plans_without_budgets_never_refuse_for_spend() -> None:
    plan = dataclasses.replace(PLAN, tokens_per_day=None, usd_per_day=None)
    rich = usage(tokens_today=10**12, usd_today=10.0**6)
    assert isinstance(admit(plan, rich, model=MODEL), Admitted)


def test_the_built_in_plans() -> None:
    assert dict(DEFAULT_PLANS) == {"free": FREE, "pro": PRO, "team": TEAM}
    assert [FREE.tier, PRO.tier, TEAM.tier] == [0, 1, 2]
    assert FREE.allows_model("anthropic:claude-haiku-4-5")
    assert FREE.allows_model("openai:gpt-5-mini") and FREE.allows_model("o4-mini")
    assert not FREE.allows_model("anthropic:claude-opus-4-5")
    assert TEAM.max_concurrent_sessions > PRO.max_concurrent_sessions > 1


def test_usage_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="running"):
        usage(running=-1)


CONFIG = """
[plans.startup]
tier = 1
max_concurrent_sessions = 3
max_queued_sessions = 10
tokens_per_day = 20_000_000
usd_per_day = 25
allowed_models = ["*claude-*"]
max_wall_s = 3600

[plans.hobby]
tier = 0
max_concurrent_sessions = 1
max_queued_sessions = 0
max_wall_s = 900.5
"""


def test_plans_load_from_toml() -> None:
    plans = plans_from_mapping(tomllib.loads(CONFIG)["plans"])
    assert plans["startup"] == Plan(
        name="startup",
        tier=1,
        max_concurrent_sessions=3,
        max_queued_sessions=10,
        tokens_per_day=20_000_000,
        usd_per_day=25,
        allowed_models=("*claude-*",),
        max_wall_s=3600,
    )
    hobby = plans["hobby"]
    assert (hobby.tokens_per_day, hobby.usd_per_day, hobby.allowed_models) == (None, None, ())


def good(**changes: Any) -> dict[str, Any]:
    """One valid plan table, changed by `changes` (a value of None removes the key)."""
    table: dict[str, Any] = {
        "tier": 0,
        "max_concurrent_sessions": 1,
        "max_queued_sessions": 0,
        "max_wall_s": 60,
    }
    table.update(changes)
    return {key: value for key, value in table.items() if value is not None}


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (good(colour="red"), r"plans\.gold: unknown key 'colour'"),
        (good(tier=None), r"plans\.gold: missing key 'tier'"),
        (good(tier="1"), r"plans\.gold\.tier must be a whole number, not str '1'"),
        (good(tier=1.5), r"plans\.gold\.tier must be a whole number"),
        (good(tier=True), r"plans\.gold\.tier must be a whole number, not bool"),
        (good(tier=-1), r"plans\.gold\.tier must be at least 0, not -1"),
        (good(max_queued_sessions=-3), r"plans\.gold\.max_queued_sessions must be at least 0"),
        (good(max_concurrent_sessions=0), r"max_concurrent_sessions must be at least 1, not 0"),
        (good(tokens_per_day=-1), r"plans\.gold\.tokens_per_day must be at least 0"),
        (good(usd_per_day=-0.5), r"plans\.gold\.usd_per_day must be a finite number at least 0"),
        (good(usd_per_day="5"), r"plans\.gold\.usd_per_day must be a number, not str"),
        (good(usd_per_day=float("nan")), r"plans\.gold\.usd_per_day must be a finite number"),
        (good(max_wall_s=0), r"plans\.gold\.max_wall_s must be a finite number more than 0"),
        (good(allowed_models="gpt-*"), r"plans\.gold\.allowed_models must be a list"),
        (good(allowed_models=["gpt-*", 3]), r"plans\.gold\.allowed_models must be a list"),
        (good(allowed_models=[""]), r"plans\.gold\.allowed_models must be a list"),
    ],
)
def test_config_errors_name_the_plan_and_key(table: dict[str, Any], expected: str) -> None:
    with pytest.raises(PlanError, match=expected):
        plans_from_mapping({"gold": table})


def test_config_errors_about_the_shape() -> None:
    with pytest.raises(PlanError, match=r"^plans must be a table of plans, not list"):
        plans_from_mapping([])  # type: ignore[arg-type]
    with pytest.raises(PlanError, match=r"^plans\.gold must be a table, not int 3"):
        plans_from_mapping({"gold": 3})
    with pytest.raises(PlanError, match=r"^settings\.toml \[plans\]\.: a plan's name"):
        plans_from_mapping({"": good()}, origin="settings.toml [plans]")
    assert issubclass(PlanError, ConfigError)


def test_a_plan_made_in_code_is_checked_too() -> None:
    with pytest.raises(PlanError, match=r"plan 'x'\.max_queued_sessions must be at least 0"):
        dataclasses.replace(PLAN, name="x", max_queued_sessions=-1)
    with pytest.raises(PlanError, match="allowed_models"):
        dataclasses.replace(PLAN, allowed_models=["gpt-*"])  # type: ignore[arg-type]
