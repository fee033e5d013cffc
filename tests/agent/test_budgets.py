from kestrel.agent.budgets import exceeded, warnings
from kestrel.protocol.events import Limits, Totals


def test_nothing_spent_nothing_said() -> None:
    limits = Limits(max_turns=10, max_tokens=1000, max_cost_usd=1.0, max_wall_s=60)
    assert exceeded(limits, Totals()) is None
    assert warnings(limits, Totals(), set()) == []


def test_each_budget_stops_at_its_limit() -> None:
    cases = [
        (Limits(max_turns=3), Totals(turns=3), "turns"),
        (Limits(max_tokens=100), Totals(input_tokens=60, output_tokens=40), "tokens"),
        (Limits(max_cost_usd=0.5), Totals(cost_usd=0.5), "cost"),
        (Limits(max_wall_s=10), Totals(wall_s=10.5), "wall_time"),
    ]
    for limits, totals, budget in cases:
        spent = exceeded(limits, totals)
        assert spent is not None and spent.budget == budget


def test_cached_tokens_count_toward_the_token_budget() -> None:
    spent = exceeded(Limits(max_tokens=100), Totals(cache_read_tokens=90, output_tokens=10))
    assert spent is not None and spent.budget == "tokens"


def test_warns_at_eighty_percent_once() -> None:
    limits = Limits(max_turns=10)
    first = warnings(limits, Totals(turns=8), set())
    assert [(w.budget, w.used, w.limit) for w in first] == [("turns", 8, 10)]
    assert warnings(limits, Totals(turns=9), {"turns"}) == []
    assert warnings(limits, Totals(turns=7), set()) == []
