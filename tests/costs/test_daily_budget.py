"""The daily budget counts every session since local midnight, warns at 80%, stops at 100%."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cost_kit import NOON, Clock, done, make_loop, priced

from kestrel.agent.daily import DailyBudget, DailyLimits, local_midnight
from kestrel.app import daily_budget
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import BudgetWarning, Limits, ModelCompleted, SessionFinished
from kestrel.settings_load import load_settings
from kestrel.store import MemoryStore, SQLiteStore
from kestrel.store.base import EventStore

DAY = 24 * 3600.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "a.txt").write_text("a\n")
    return tmp_path / "w"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> SQLiteStore:
    return SQLiteStore(tmp_path / "data" / "sessions.db", clock=clock)


def warnings_of(store: EventStore, session_id: str) -> list[BudgetWarning]:
    return [r.event for r in store.read(session_id) if isinstance(r.event, BudgetWarning)]


def test_local_midnight_is_the_start_of_the_day() -> None:
    midnight = local_midnight(NOON)
    assert midnight <= NOON < midnight + DAY
    assert local_midnight(midnight) == midnight
    assert local_midnight(midnight - 1) < midnight


async def test_stops_at_the_daily_limit_counting_another_session_of_today_only(
    root: Path, store: SQLiteStore, clock: Clock
) -> None:
    clock.now = NOON - DAY  # Yesterday's big spend must not count.
    yesterday = make_loop(root, [*priced(1.0), done()], store=store, clock=clock)
    assert (await yesterday.run()).reason == "done"
    clock.now = NOON - 3600
    earlier = make_loop(root, [*priced(0.01, 2), done()], store=store, clock=clock)
    assert (await earlier.run()).totals.cost_usd == pytest.approx(0.02)

    clock.now = NOON
    daily = DailyBudget(DailyLimits(max_cost_usd=0.05), store, clock)
    loop = make_loop(root, priced(0.01, 10), store=store, clock=clock, daily=daily)
    finished = await loop.run()

    assert finished.reason == "budget"
    assert finished.totals.turns == 3  # 0.02 earlier today + 3 x 0.01 reaches 0.05 exactly.
    assert finished.totals.cost_usd == pytest.approx(0.03)
    assert finished.day_cost_usd == pytest.approx(0.05)
    assert finished.day_tokens == 500
    assert "daily cost budget spent: $0.0500 of $0.05" in finished.detail
    assert "limits.max_cost_usd_per_day" in finished.detail
    warned = warnings_of(store, loop.session_id)
    assert [(w.budget, round(w.used, 6), w.limit) for w in warned] == [("cost_per_day", 0.04, 0.05)]
    # The model was told, with the result of the call that crossed 80%.
    notes = [m for m in loop.state.messages if "Budget warning: cost_per_day" in str(m)]
    assert len(notes) == 1


async def test_a_session_that_starts_over_the_daily_limit_makes_no_call(
    root: Path, store: SQLiteStore, clock: Clock
) -> None:
    first = make_loop(root, [*priced(0.03, 2), done()], store=store, clock=clock)
    await first.run()
    daily = DailyBudget(DailyLimits(max_cost_usd=0.05), store, clock)
    loop = make_loop(root, priced(0.01, 3), store=store, clock=clock, daily=daily)
    finished = await loop.run()
    assert (finished.reason, finished.totals.turns) == ("budget", 0)
    assert not any(isinstance(r.event, ModelCompleted) for r in store.read(loop.session_id))


async def test_the_day_rolls_over_at_midnight(root: Path, store: SQLiteStore, clock: Clock) -> None:
    clock.now = local_midnight(NOON) - 60  # A minute before midnight.
    daily = DailyBudget(DailyLimits(max_cost_usd=0.02), store, clock)
    loop = make_loop(root, priced(0.01, 10), store=store, clock=clock, daily=daily)
    assert (await loop.run()).totals.turns == 2
    clock.now = local_midnight(NOON) + 60  # The next day starts from nothing.
    again = make_loop(root, priced(0.01, 10), store=store, clock=clock, daily=daily)
    finished = await again.run()
    assert (finished.reason, finished.totals.turns) == ("budget", 2)
    assert finished.day_cost_usd == pytest.approx(0.02)


async def test_daily_token_budget(root: Path, clock: Clock) -> None:
    store = MemoryStore(clock=clock)
    daily = DailyBudget(DailyLimits(max_tokens=1_000), store, clock)
    loop = make_loop(root, priced(0.0, 10, tokens=200), store=store, clock=clock, daily=daily)
    finished = await loop.run()
    assert (finished.reason, finished.totals.tokens) == ("budget", 1_000)
    assert "daily tokens budget spent: 1000 of 1000 tokens" in finished.detail
    assert "limits.max_tokens_per_day" in finished.detail
    assert [w.used for w in warnings_of(store, loop.session_id)] == [1_000 * 0.8]


async def test_two_sessions_at_once_see_each_others_spend(
    root: Path, tmp_path: Path, clock: Clock
) -> None:
    # Two processes' stores on one file: each session reads the other's spend from the log.
    path = tmp_path / "data" / "sessions.db"
    first_store, second_store = SQLiteStore(path, clock=clock), SQLiteStore(path, clock=clock)
    alone = [*priced(0.01, 4), done()]  # Each alone stays under the limit.
    loops = [
        make_loop(
            root,
            alone,
            store=s,
            clock=clock,
            daily=DailyBudget(DailyLimits(max_cost_usd=0.05), s, clock),
        )
        for s in (first_store, second_store)
    ]
    finished = await asyncio.gather(*(loop.run() for loop in loops))
    assert "budget" in [f.reason for f in finished]
    spent = first_store.spent_since(local_midnight(NOON)).cost_usd
    # Each may finish the call it had started when the other crossed the line, no more.
    assert 0.05 - 1e-9 <= spent <= 0.06 + 1e-9


async def test_session_budgets_stop_exactly_at_the_limit(root: Path, clock: Clock) -> None:
    store = MemoryStore(clock=clock)
    limits = Limits(max_cost_usd=1.0)
    loop = make_loop(root, priced(0.1, 20), store=store, clock=clock, limits=limits)
    finished = await loop.run()
    # Ten calls of 0.1 add up to 0.9999999999999999 in floating point: that is the limit, and
    # an eleventh call would go past it.
    assert (finished.reason, finished.totals.turns) == ("budget", 10)
    assert finished.detail == "cost budget spent: 1 of 1"
    assert [w.budget for w in warnings_of(store, loop.session_id)] == ["cost"]


async def test_without_a_daily_budget_the_footer_fields_stay_empty(
    root: Path, clock: Clock
) -> None:
    loop = make_loop(root, [*priced(0.01), done()], store=MemoryStore(clock=clock), clock=clock)
    finished = await loop.run()
    assert isinstance(finished, SessionFinished)
    assert (finished.day_cost_usd, finished.day_tokens) == (None, None)


def test_settings_wire_the_daily_budget_to_the_store(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {"KESTREL_MAX_COST_USD_PER_DAY": "2.5", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    settings = load_settings(work, env=env, flags={}, home=home)
    store = MemoryStore()
    daily = daily_budget(settings, store)
    assert daily is not None and daily.limits == DailyLimits(max_cost_usd=2.5)
    assert daily.meter is store
    unset = load_settings(work, env={}, flags={}, home=home)
    assert daily_budget(unset, store) is None
    with pytest.raises(ConfigError, match="KESTREL_MAX_TOKENS_PER_DAY: Input should be greater"):
        load_settings(work, env={"KESTREL_MAX_TOKENS_PER_DAY": "-5"}, flags={}, home=home)
