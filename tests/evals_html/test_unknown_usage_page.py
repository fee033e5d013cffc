"""The trajectory page marks estimated tokens and unpriced calls, and shows budget notices."""

from __future__ import annotations

import re

from kestrel.evals.html import render_trajectory
from kestrel.protocol.events import (
    BudgetNotice,
    Limits,
    ModelCompleted,
    ModelRequestStarted,
    SessionFinished,
    SessionStarted,
    Totals,
)
from kestrel.protocol.messages import AssistantTurn, Usage

NOTICE = "the cost budget cannot be enforced: no price is known for openai:my-local-model"


def visible(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def page_for(usage: Usage, totals: Totals) -> str:
    return visible(
        render_trajectory(
            [
                SessionStarted(
                    session_id="s1",
                    task="list",
                    cwd="/repo",
                    model="openai:my-local-model",
                    limits=Limits(max_cost_usd=1.0),
                ),
                BudgetNotice(budget="cost", enforced=False, detail=NOTICE),
                ModelRequestStarted(request_id="r1", model="openai:my-local-model", turn=1),
                ModelCompleted(request_id="r1", message=AssistantTurn(text="done"), usage=usage),
                SessionFinished(reason="done", totals=totals),
            ]
        )
    )


def test_estimated_and_unpriced_calls_are_marked() -> None:
    bare = Usage(
        model="my-local-model",
        input_tokens=3_000,
        output_tokens=20,
        priced=False,
        tokens_reported=False,
    )
    totals = Totals(turns=1, input_tokens=3_000, tokens_estimated=True, cost_known=False)
    text = page_for(bare, totals)
    assert "(unpriced) " in text and "(estimated tokens: the server reported none)" in text
    assert "input tokens (estimated)" in text and "cost (unpriced model)" in text
    assert "Budget notice" in text and NOTICE in text


def test_reported_usage_is_not_marked() -> None:
    usage = Usage(model="gpt-4o", input_tokens=3_000, output_tokens=20, cost_usd=0.01)
    text = page_for(usage, Totals(turns=1, input_tokens=3_000, cost_usd=0.01))
    assert "estimated" not in text and "unpriced" not in text
