"""Questions and answers folded from the log: the first answer counts, answers to nothing are
ignored, and only repeatable questions can be allowed for the whole session."""

from __future__ import annotations

from kestrel.agent.asks import Asks, fold_ask
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    Event,
    PermissionDecided,
    Record,
    SessionFinished,
)


def _fold(*events: Event) -> Asks:
    asks = Asks()
    for seq, event in enumerate(events, 1):
        fold_ask(asks, Record(session_id="s", seq=seq, at=0.0, event=event))
    return asks


def _asked(call_id: str = "c1", *, repeatable: bool = True) -> ApprovalRequested:
    return ApprovalRequested(
        call_id=call_id,
        name="bash",
        arguments='{"command": "ls"}',
        kind="execute",
        reason="asks",
        repeatable=repeatable,
    )


def test_an_open_question_waits_until_answered_and_then_until_acted_on() -> None:
    asks = _fold(_asked())
    assert [r.seq for r in asks.waiting()] == [1]
    asks = _fold(_asked(), ApprovalDecided(call_id="c1", allow=False, message="no"))
    assert asks.waiting() == [] and asks.answers["c1"].message == "no"
    asks = _fold(
        _asked(),
        ApprovalDecided(call_id="c1", allow=True),
        PermissionDecided(call_id="c1", decision="allow", decided_by="user"),
    )
    assert asks.open == {} and asks.answers == {}


def test_the_first_answer_counts_and_an_answer_to_nothing_is_ignored() -> None:
    asks = _fold(
        ApprovalDecided(call_id="c9", allow=True),
        _asked(),
        ApprovalDecided(call_id="c1", allow=False, by="first"),
        ApprovalDecided(call_id="c1", allow=True, scope="session", by="second"),
    )
    assert asks.answers["c1"].by == "first"
    assert "c9" not in asks.answers
    assert asks.always == set()


def test_only_a_repeatable_question_can_be_allowed_for_the_session() -> None:
    asks = _fold(_asked(), ApprovalDecided(call_id="c1", allow=True, scope="session"))
    assert asks.always == {"bash"}
    asks = _fold(
        _asked(repeatable=False), ApprovalDecided(call_id="c1", allow=True, scope="session")
    )
    assert asks.always == set()


def test_a_stop_asked_for_lasts_until_the_session_finishes() -> None:
    asks = _fold(CancelRequested(by="kestrel cancel"))
    assert asks.cancel is not None
    asks = _fold(CancelRequested(by="kestrel cancel"), SessionFinished(reason="cancelled"))
    assert asks.cancel is None
