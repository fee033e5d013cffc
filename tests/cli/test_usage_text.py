"""How spend reads: estimated tokens marked, unknown cost never shown as $0.0000."""

from __future__ import annotations

import io

import pytest

from kestrel.cli.render import QuietFrontend, add_usage, footer, spend_line
from kestrel.cli.usage_text import cost_text, dollars, spend_text, tokens_text
from kestrel.protocol.events import (
    BudgetNotice,
    BudgetWarning,
    ModelCompleted,
    Record,
    SessionFinished,
    Totals,
)
from kestrel.protocol.messages import AssistantTurn, Usage

REPORTED = Totals(turns=1, input_tokens=1_000, output_tokens=234, cost_usd=0.0123)
ESTIMATED = Totals(turns=1, input_tokens=1_000, output_tokens=234, tokens_estimated=True)


@pytest.mark.parametrize(
    ("totals", "plain", "spelled"),
    [
        (REPORTED, "1.2k tokens", "1.2k tokens"),
        (ESTIMATED, "~1.2k tokens", "~1.2k tokens (estimated)"),
        (Totals(tokens_estimated=True), "? tokens", "? tokens"),
        (Totals(), "0 tokens", "0 tokens"),
        (Totals(output_tokens=999), "999 tokens", "999 tokens"),
    ],
)
def test_tokens_are_marked_when_estimated(totals: Totals, plain: str, spelled: str) -> None:
    assert tokens_text(totals) == plain
    assert tokens_text(totals, spelled=True) == spelled


@pytest.mark.parametrize(
    ("cost", "known", "estimated", "shown"),
    [
        (0.0123, True, False, "$0.0123"),
        (0.0, True, False, "$0.0000"),
        (0.0123, True, True, "~$0.0123"),
        (0.0, False, False, "$?"),
        (0.0, False, True, "$?"),
        (0.12, False, False, "≥ $0.1200"),
    ],
)
def test_dollars_say_when_they_are_unknown(
    cost: float, known: bool, estimated: bool, shown: str
) -> None:
    assert dollars(cost, known=known, estimated=estimated) == shown


def test_spend_text_joins_both() -> None:
    unpriced = Totals(input_tokens=5_000, tokens_estimated=True, cost_known=False)
    assert spend_text(unpriced, spelled=True) == "~5.0k tokens (estimated) · $?"
    assert spend_text(REPORTED) == "1.2k tokens · $0.0123"
    assert cost_text(Totals(cost_usd=0.5, cost_known=False)) == "≥ $0.5000"


def completed(usage: Usage) -> ModelCompleted:
    return ModelCompleted(request_id="r", message=AssistantTurn(text="hi"), usage=usage)


def test_the_live_spend_line_carries_estimates_and_unknown_prices() -> None:
    bare = Usage(model="m", input_tokens=3_000, priced=False, tokens_reported=False)
    spent = add_usage(Totals(), completed(bare))
    assert (spent.tokens_estimated, spent.cost_known) == (True, False)
    assert spend_line(spent) == "  ⋯ spent ~3.0k tokens · $?"
    priced = Usage(model="gpt-4o", input_tokens=1_000, cost_usd=0.25)
    both = add_usage(spent, completed(priced))
    assert spend_line(both) == "  ⋯ spent ~4.0k tokens · ≥ $0.2500"


def test_the_footer_never_shows_an_unknown_cost_as_zero() -> None:
    totals = Totals(turns=2, input_tokens=1_234, tokens_estimated=True, cost_known=False)
    line = footer(SessionFinished(reason="done", totals=totals), "abc")
    assert " · ~1.2k tokens (estimated) · $? · " in line and "$0.0000" not in line
    known = footer(SessionFinished(reason="done", totals=REPORTED), "abc")
    assert " · 1.2k tokens · $0.0123 · " in known


def test_headless_runs_say_budget_notices_on_stderr_only() -> None:
    err = io.StringIO()
    quiet = QuietFrontend(err)
    notice = BudgetNotice(budget="cost", enforced=False, detail="the cost budget cannot be ...")
    quiet.render(Record(session_id="s", seq=1, at=0.0, event=notice))
    quiet.render(
        Record(session_id="s", seq=2, at=0.0, event=BudgetWarning(budget="turns", used=8, limit=10))
    )
    assert err.getvalue() == "kestrel: warning: the cost budget cannot be ...\n"
