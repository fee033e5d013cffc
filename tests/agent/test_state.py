from kestrel.agent.state import replay
from kestrel.protocol.events import (
    Event,
    LoopDetected,
    ModelCompleted,
    Record,
    SessionResumed,
    SessionStarted,
    ToolCallRequested,
    ToolFinished,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, ToolCall, ToolResultTurn, Usage, UserTurn


def records(events: list[tuple[float, Event]]) -> list[Record]:
    return [Record(session_id="s", seq=i + 1, at=at, event=e) for i, (at, e) in enumerate(events)]


CALLS = (
    ToolCall(id="a", name="read_file", arguments='{"path": "x"}'),
    ToolCall(id="b", name="grep", arguments='{"pattern": "y"}'),
)


def completed(text: str = "", calls: tuple[ToolCall, ...] = ()) -> ModelCompleted:
    return ModelCompleted(
        request_id="r",
        message=AssistantTurn(text=text, tool_calls=calls),
        usage=Usage(
            model="m", input_tokens=100, output_tokens=10, cache_read_tokens=50, cost_usd=0.01
        ),
    )


def started() -> SessionStarted:
    return SessionStarted(session_id="s", task="t", cwd="/w", model="m")


def test_results_join_the_conversation_in_call_order_whatever_order_they_finish() -> None:
    state = replay(
        records(
            [
                (0, started()),
                (0, UserMessage(text="t")),
                (1, completed("hi", CALLS)),
                (2, ToolCallRequested(call=CALLS[0])),
                (2, ToolCallRequested(call=CALLS[1])),
                (3, ToolFinished(call_id="b", name="grep", content="B")),
            ]
        )
    )
    assert state.unfinished == [CALLS[0]]
    assert state.messages[-1] == AssistantTurn(text="hi", tool_calls=CALLS)
    state = replay(
        records(
            [
                (0, started()),
                (0, UserMessage(text="t")),
                (1, completed("hi", CALLS)),
                (3, ToolFinished(call_id="b", name="grep", content="B")),
                (4, ToolFinished(call_id="a", name="read_file", content="A", is_error=True)),
            ]
        )
    )
    assert state.pending == []
    assert state.messages[-2:] == [
        ToolResultTurn(call_id="a", name="read_file", content="A", is_error=True),
        ToolResultTurn(call_id="b", name="grep", content="B"),
    ]


def test_totals_and_wall_time_skip_the_gap_before_a_resume() -> None:
    state = replay(
        records(
            [
                (100, started()),
                (100, UserMessage(text="t")),
                (110, completed("x")),
                (500, SessionResumed(from_seq=3)),
                (505, completed("y")),
            ]
        )
    )
    totals = state.totals
    assert (totals.turns, totals.input_tokens, totals.output_tokens) == (2, 200, 20)
    assert totals.cache_read_tokens == 100 and abs(totals.cost_usd - 0.02) < 1e-9
    assert totals.wall_s == 15


def test_a_loop_warning_is_attached_to_the_latest_tool_result() -> None:
    state = replay(
        records(
            [
                (0, started()),
                (0, UserMessage(text="t")),
                (1, completed("", CALLS[:1])),
                (2, ToolFinished(call_id="a", name="read_file", content="A")),
                (2, LoopDetected(pattern="repeat", action="warn", detail="same again")),
            ]
        )
    )
    last = state.messages[-1]
    assert isinstance(last, ToolResultTurn)
    assert last.content.startswith("A\n\n[kestrel] Loop warning: same again")


def test_a_user_message_answers_calls_left_without_result_as_interrupted() -> None:
    state = replay(
        records(
            [
                (0, started()),
                (0, UserMessage(text="t")),
                (1, completed("", CALLS[:1])),
                (2, UserMessage(text="never mind")),
            ]
        )
    )
    assert state.messages[-2].is_error  # type: ignore[union-attr]
    assert "Interrupted" in state.messages[-2].content  # type: ignore[union-attr]
    assert state.messages[-1] == UserTurn(text="never mind")
