"""Plans and the limits the gateway checks before a session starts, as a pure function of usage.

A tenant's plan bounds how many of its sessions run at once and wait in the queue, how many
tokens and dollars it may spend a day, which models it may use and how long one session may
run. `admit` decides, from the plan and the tenant's usage now, whether a new session may start
or wait, or why not: 429 with a `Retry-After` for a limit that frees up with time, 403 for a
model the plan does not include. User-defined plans come from a settings table:

    [plans.startup]
    tier = 1                          # queue priority: higher goes first (free 0, pro 1, team 2)
    max_concurrent_sessions = 3
    max_queued_sessions = 10
    tokens_per_day = 20_000_000       # leave out for no daily token budget
    usd_per_day = 25.0                # leave out for no daily dollar budget
    allowed_models = ["*claude-*"]    # fnmatch globs over the model's name; leave out for all
    max_wall_s = 3600
    requests_per_minute = 600         # API requests a minute; leave out for no limit
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

from kestrel.protocol.errors import ConfigError

Limit = Literal[
    "max_concurrent_sessions",
    "max_queued_sessions",
    "tokens_per_day",
    "usd_per_day",
    "allowed_models",
]
"""Which limit refused a session: the name of the `Plan` field."""

SLOT_RETRY_S = 10
"""Retry-After for a tenant whose sessions fill its slots: sessions end at unforeseeable times."""

DAY_RETRY_FALLBACK_S = 3600
"""Retry-After for a spent daily budget when the caller does not say when the day resets."""

MAX_PLAN_NAME_CHARS = 100
"""The longest plan name."""

_REQUIRED = ("tier", "max_concurrent_sessions", "max_queued_sessions", "max_wall_s")
_OPTIONAL = ("tokens_per_day", "usd_per_day", "allowed_models", "requests_per_minute")


class PlanError(ConfigError):
    """A plan's definition is malformed; the message names the plan and the key."""


def _check_name(where: str, name: object) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_PLAN_NAME_CHARS:
        raise PlanError(
            f"{where}: a plan's name must be 1 to {MAX_PLAN_NAME_CHARS} characters, not {name!r}"
        )


def _check_value(where: str, key: str, value: object) -> None:
    """Raise `PlanError` unless `value` is of the type and range the `Plan` field `key` takes."""
    if key in (
        "tier",
        "max_queued_sessions",
        "max_concurrent_sessions",
        "tokens_per_day",
        "requests_per_minute",
    ):
        if value is None and key in ("tokens_per_day", "requests_per_minute"):
            return
        least = 1 if key in ("max_concurrent_sessions", "requests_per_minute") else 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise PlanError(f"{where}.{key} must be a whole number, not {_kind(value)}")
        if value < least:
            raise PlanError(f"{where}.{key} must be at least {least}, not {value}")
    elif key in ("usd_per_day", "max_wall_s"):
        if value is None and key == "usd_per_day":
            return
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise PlanError(f"{where}.{key} must be a number, not {_kind(value)}")
        if not math.isfinite(value) or value < 0 or (key == "max_wall_s" and value == 0):
            bound = "more than 0" if key == "max_wall_s" else "at least 0"
            raise PlanError(f"{where}.{key} must be a finite number {bound}, not {value}")
    elif key == "allowed_models":
        if not isinstance(value, tuple) or not all(isinstance(g, str) and g for g in value):
            raise PlanError(f"{where}.{key} must be a list of model name globs, not {value!r}")
    else:
        raise PlanError(f"{where}: unknown key {key!r}")


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What a tenant may use: its queue priority, session slots, daily budgets and models."""

    name: str
    tier: int
    """Queue priority: higher tiers go first (see `FairQueue` for how long a lower one waits)."""
    max_concurrent_sessions: int
    max_queued_sessions: int
    """Sessions that may wait for one of the tenant's slots; 0: refuse when all are taken."""
    tokens_per_day: int | None = None
    """Tokens the tenant's sessions may use a day; None: no budget."""
    usd_per_day: float | None = None
    """Dollars the tenant's sessions may spend a day; None: no budget."""
    allowed_models: tuple[str, ...] = ()
    """fnmatch globs (case-sensitive) over the model's name; empty: every model."""
    max_wall_s: float
    requests_per_minute: int | None = None
    """API requests the tenant may make a minute, across every server process (bursts of up
    to that many); None: no limit."""

    def __post_init__(self) -> None:
        _check_name("plan", self.name)
        for spec in fields(self):
            if spec.name != "name":
                _check_value(f"plan {self.name!r}", spec.name, getattr(self, spec.name))

    def allows_model(self, model: str) -> bool:
        """Whether a session of this plan may use `model`."""
        if not self.allowed_models:
            return True
        return any(fnmatch.fnmatchcase(model, glob) for glob in self.allowed_models)


FREE = Plan(
    name="free",
    tier=0,
    max_concurrent_sessions=1,
    max_queued_sessions=2,
    tokens_per_day=2_000_000,
    usd_per_day=2.0,
    # The small models: a free tenant's day then holds a few real sessions, not one.
    allowed_models=("*claude-haiku-*", "*gpt-*-mini*", "*gpt-*-nano*", "*o[0-9]-mini*"),
    max_wall_s=20 * 60,
)
"""The plan a new tenant starts on: one session at a time, small models, a small budget."""

PRO = Plan(
    name="pro",
    tier=1,
    max_concurrent_sessions=4,
    max_queued_sessions=20,
    tokens_per_day=50_000_000,
    usd_per_day=50.0,
    max_wall_s=2 * 3600,
)
"""A paying individual: every model, four sessions at once, ahead of free work in the queue."""

TEAM = Plan(
    name="team",
    tier=2,
    max_concurrent_sessions=16,
    max_queued_sessions=100,
    tokens_per_day=500_000_000,
    usd_per_day=500.0,
    max_wall_s=4 * 3600,
)
"""A paying team: sixteen sessions at once, first in the queue."""

DEFAULT_PLANS: Mapping[str, Plan] = MappingProxyType({p.name: p for p in (FREE, PRO, TEAM)})
"""The built-in plans by name; user-defined plans of the same name replace them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantUsage:
    """What a tenant uses now: its sessions running and queued, and its spend today."""

    running: int
    queued: int
    tokens_today: int
    usd_today: float
    seconds_until_day_resets: float | None = None
    """When the daily budgets start afresh; None: unknown (Retry-After falls back to an hour)."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is not None and value < 0:
                raise ValueError(f"usage {spec.name} must not be negative, not {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """The session may go ahead; it runs for at most `max_wall_s`."""

    queued: bool
    """True when the tenant's slots are all taken: it waits for one of its own to finish."""
    max_wall_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """The session may not start: the HTTP status, when to retry, the limit and why, in words."""

    status: Literal[403, 429]
    limit: Limit
    message: str
    retry_after_s: int | None
    """Whole seconds to wait (at least 1) for a 429; None for a 403, which waiting cannot fix."""

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers the refusal comes with: `Retry-After` for a 429."""
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


def admit(plan: Plan, usage: TenantUsage, *, model: str) -> Admitted | Refused:
    """Whether a tenant on `plan`, using `usage` now, may start a session of `model`.

    The model is checked first (no wait helps), then the daily budgets (a queued session could
    not spend anything either), then the slots: a session is admitted while a concurrent slot
    is free or, failing that, while the tenant's queue has room.
    """
    if not plan.allows_model(model):
        allowed = ", ".join(plan.allowed_models)
        return Refused(
            status=403,
            limit="allowed_models",
            message=f"plan {plan.name} does not include model {model!r}; it allows {allowed}",
            retry_after_s=None,
        )
    refused = _over_budget(plan, usage)
    if refused is not None:
        return refused
    if usage.running < plan.max_concurrent_sessions:
        return Admitted(queued=False, max_wall_s=plan.max_wall_s)
    if usage.queued < plan.max_queued_sessions:
        return Admitted(queued=True, max_wall_s=plan.max_wall_s)
    slots = _count(plan.max_concurrent_sessions, "concurrent session")
    if plan.max_queued_sessions == 0:
        return _retry_soon(
            "max_concurrent_sessions",
            f"tenant is at its {slots} of plan {plan.name}; retry when one finishes",
        )
    waiting = _count(plan.max_queued_sessions, "queued session")
    return _retry_soon(
        "max_queued_sessions",
        f"tenant is at its {slots} and {waiting} of plan {plan.name}; retry when one finishes",
    )


def session_caps(plan: Plan, usage: TenantUsage) -> dict[str, float]:
    """The budgets a new session of the tenant runs under: the plan's wall time, and what is
    left of its daily tokens and dollars (each session is stopped by its own budget when it
    would spend past the day's; sessions running at once may together pass it by what one
    turn of each spends)."""
    caps: dict[str, float] = {"max_wall_s": plan.max_wall_s}
    if plan.tokens_per_day is not None:
        caps["max_tokens"] = max(plan.tokens_per_day - usage.tokens_today, 1)
    if plan.usd_per_day is not None:
        caps["max_cost_usd"] = max(plan.usd_per_day - usage.usd_today, 0.01)
    return caps


def plans_from_mapping(data: Mapping[str, Any], *, origin: str = "plans") -> dict[str, Plan]:
    """Plans defined in a parsed settings table (TOML or JSON), by name.

    `origin` is where the table came from; every error names it, the plan and the key.
    """
    if not isinstance(data, Mapping):
        raise PlanError(f"{origin} must be a table of plans, not {_kind(data)}")
    plans: dict[str, Plan] = {}
    for name, table in data.items():
        where = f"{origin}.{name}"
        _check_name(where, name)
        if not isinstance(table, Mapping):
            raise PlanError(f"{where} must be a table, not {_kind(table)}")
        unknown = sorted(set(table) - {*_REQUIRED, *_OPTIONAL})
        if unknown:
            known = ", ".join((*_REQUIRED, *_OPTIONAL))
            raise PlanError(f"{where}: unknown key {unknown[0]!r}; a plan's keys are {known}")
        missing = [key for key in _REQUIRED if key not in table]
        if missing:
            raise PlanError(f"{where}: missing key {missing[0]!r}")
        values = dict(table)
        if isinstance(values.get("allowed_models"), list):
            values["allowed_models"] = tuple(values["allowed_models"])
        for key, value in values.items():
            _check_value(where, key, value)
        plans[name] = Plan(name=name, **values)
    return plans


def _over_budget(plan: Plan, usage: TenantUsage) -> Refused | None:
    until_reset = usage.seconds_until_day_resets
    retry_after = DAY_RETRY_FALLBACK_S if until_reset is None else max(1, math.ceil(until_reset))
    when = f"retry when the day's budget resets, in {_duration(retry_after)}"
    if plan.tokens_per_day is not None and usage.tokens_today >= plan.tokens_per_day:
        return Refused(
            status=429,
            limit="tokens_per_day",
            message=f"tenant has used {usage.tokens_today:,} of the {plan.tokens_per_day:,} "
            f"tokens a day of plan {plan.name}; {when}",
            retry_after_s=retry_after,
        )
    if plan.usd_per_day is not None and usage.usd_today >= plan.usd_per_day:
        return Refused(
            status=429,
            limit="usd_per_day",
            message=f"tenant has spent ${usage.usd_today:,.2f} of the ${plan.usd_per_day:,.2f} "
            f"a day of plan {plan.name}; {when}",
            retry_after_s=retry_after,
        )
    return None


def _retry_soon(limit: Limit, message: str) -> Refused:
    return Refused(status=429, limit=limit, message=message, retry_after_s=SLOT_RETRY_S)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
