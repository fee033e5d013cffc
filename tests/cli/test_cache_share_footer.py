"""The cache-read share: computed from a session's usage totals and shown in its last line."""

from __future__ import annotations

import io

from rich.console import Console

from kestrel.agent.state import replay
from kestrel.cli.render import ConsoleFrontend, footer
from kestrel.protocol.events import (
    ModelCompleted,
    ModelSwitched,
    Record,
    SessionFinished,
    SessionStarted,
    Totals,
)
from kestrel.protocol.messages import AssistantTurn, Usage


def test_the_share_is_cache_reads_over_all_input() -> None:
    totals = Totals(input_tokens=100, cache_write_tokens=300, cache_read_tokens=1_600)
    assert totals.total_input_tokens == 2_000
    assert totals.cache_read_share == 0.8
    assert Totals().cache_read_share is None


def test_the_session_totals_fold_each_call_s_cache_reads() -> None:
    usages = [
        Usage(model="m", input_tokens=50, cache_write_tokens=4_000, output_tokens=10),
        Usage(model="m", input_tokens=60, cache_read_tokens=4_000, cache_write_tokens=500),
        Usage(model="m", input_tokens=40, cache_read_tokens=4_500, cache_write_tokens=300),
    ]
    events = [SessionStarted(session_id="s", task="t", cwd="/", model="m")] + [
        ModelCompleted(request_id=str(i), message=AssistantTurn(text="x"), usage=u)
        for i, u in enumerate(usages)
    ]
    state = replay(Record(session_id="s", seq=i + 1, at=0.0, event=e) for i, e in enumerate(events))
    assert state.totals.cache_read_share == 8_500 / 13_450


def test_the_footer_shows_the_share_and_omits_it_without_cache_reads() -> None:
    cached = SessionFinished(
        reason="done", totals=Totals(turns=3, input_tokens=500, cache_read_tokens=1_500)
    )
    assert "(1.5k cached, 75% of input)" in footer(cached, "abc")
    plain = SessionFinished(reason="done", totals=Totals(turns=1, input_tokens=500))
    assert "cached" not in footer(plain, "abc")


def test_a_switch_is_shown_with_both_models() -> None:
    out = io.StringIO()
    view = ConsoleFrontend(Console(file=out, width=200, color_system=None))
    switched = ModelSwitched(
        request_id="r1",
        role="main",
        from_model="anthropic:claude-sonnet-4-6",
        to_model="openai:gpt-4.1",
        error_kind="Overloaded",
        message="anthropic error 529: Overloaded",
    )
    view.render(Record(session_id="s", seq=5, at=0.0, event=switched))
    assert out.getvalue().strip() == (
        "anthropic:claude-sonnet-4-6 failed (Overloaded); the main role goes on with openai:gpt-4.1"
    )
