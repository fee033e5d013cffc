"""Compaction: where the conversation is cut, and what the compacted turn keeps verbatim."""

from __future__ import annotations

import json

import pytest

from kestrel.agent.compaction import (
    COMPACTION_OPEN,
    ContextOverflow,
    compact,
    files_touched,
    latest_request,
    message_tokens,
    reference_outputs,
    request_tokens,
    split_point,
    summary_request,
)
from kestrel.protocol.messages import AssistantTurn, Message, ToolCall, ToolResultTurn, UserTurn

GOAL = "Add rate limiting to every API endpoint; keep the public API unchanged."


def call(number: int, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"c{number}", name=name, arguments=json.dumps(arguments))


def step(
    number: int, name: str, output: str, *, error: bool = False, **arguments: object
) -> list[Message]:
    """One model turn with one call, and its result."""
    made = call(number, name, **arguments)
    return [
        AssistantTurn(text=f"step {number}", tool_calls=(made,)),
        ToolResultTurn(call_id=made.id, name=name, content=output, is_error=error),
    ]


def conversation() -> list[Message]:
    messages: list[Message] = [UserTurn(text=GOAL)]
    messages += step(1, "read_file", "x" * 4_000, path="api/views.py")
    messages += step(2, "edit_file", "edited", path="api/views.py", old_str="a", new_str="b")
    messages += step(3, "bash", "FAILED tests/test_api.py::test_limit - 429 != 200", error=True)
    messages.append(UserTurn(text="Also cover the admin endpoints, please."))
    messages += step(4, "write_file", "written", path="api/limits.py", content="LIMIT = 10\n")
    messages += step(5, "bash", "5 passed")
    return messages


def test_the_cut_falls_where_a_turn_starts_and_keeps_the_newest_turns() -> None:
    messages = conversation()
    last_two = sum(message_tokens(m) for m in messages[-4:])

    cut = split_point(messages, keep_tokens=last_two)

    assert cut == len(messages) - 4
    assert not isinstance(messages[cut], ToolResultTurn)
    for budget in range(0, 3_000, 37):  # whatever the budget, no result loses its call
        assert not isinstance(messages[split_point(messages, budget)], ToolResultTurn)


def test_the_last_turn_is_kept_even_when_it_alone_is_over_the_budget() -> None:
    messages = conversation()

    assert split_point(messages, keep_tokens=0) == len(messages) - 2
    assert split_point(messages[:1], keep_tokens=0) == 0  # nothing older to drop


def test_goal_latest_request_files_and_failures_survive_word_for_word() -> None:
    messages = conversation()
    cut = len(messages) - 2  # the latest request itself is dropped

    done = compact(
        system="rules",
        messages=messages,
        tools=(),
        goal=GOAL,
        summary="## Decisions\n- a token bucket per client",
        cut=cut,
        window_tokens=100_000,
    )

    text = done.message.text
    assert text.startswith(COMPACTION_OPEN)
    assert GOAL in text
    assert "Also cover the admin endpoints, please." in text
    assert "- api/views.py\n- api/limits.py" in text
    assert "bash: FAILED tests/test_api.py::test_limit - 429 != 200" in text
    assert "a token bucket per client" in text
    assert done.kept == 2 and done.dropped == tuple(messages[:cut])
    assert done.tokens_after < done.tokens_before


def test_the_latest_request_is_not_repeated_when_a_kept_turn_holds_it() -> None:
    messages = conversation()
    cut = messages.index(UserTurn(text="Also cover the admin endpoints, please."))

    done = compact(
        system="", messages=messages, tools=(), goal=GOAL, summary="s", cut=cut, window_tokens=10**6
    )

    assert "Also cover the admin endpoints" not in done.message.text
    assert latest_request([done.message, *messages[cut:]]).startswith("Also cover")


def test_a_request_that_cannot_fit_after_compaction_is_an_error() -> None:
    messages = conversation()
    kept = request_tokens("", messages[-2:], ())

    with pytest.raises(ContextOverflow, match="context window"):
        compact(
            system="",
            messages=messages,
            tools=(),
            goal=GOAL,
            summary="s",
            cut=len(messages) - 2,
            window_tokens=kept,  # the kept turns fit, but not with the compacted turn
        )


def test_large_outputs_become_references_except_in_the_last_turn() -> None:
    messages = conversation()
    messages += step(6, "read_file", "y" * 5_000, path="api/urls.py")
    stored: list[str] = []

    def store(result: ToolResultTurn) -> str:
        stored.append(result.content)
        return f"outputs/{result.call_id}.txt"

    result = reference_outputs(messages, over_chars=1_000, store=store)

    assert stored == ["x" * 4_000]
    moved = result[2]
    assert isinstance(moved, ToolResultTurn)
    assert moved.content.startswith("[kestrel: output moved to outputs/c1.txt (4,000 characters)")
    assert result[-1] == messages[-1]  # the newest output stays whole
    assert reference_outputs(result, over_chars=1_000, store=store) == result  # not moved twice


def test_the_summary_request_cuts_long_outputs_and_names_the_goal() -> None:
    messages = conversation()
    messages[2] = ToolResultTurn(call_id="c1", name="read_file", content="z" * 50_000)

    request = summary_request(messages, goal=GOAL)

    [turn] = request.messages
    assert isinstance(turn, UserTurn)
    assert GOAL in turn.text and "-> edit_file(" in turn.text
    assert "[... 44000 more characters]" in turn.text
    assert len(turn.text) < 10_000


def test_files_touched_skips_malformed_calls() -> None:
    bad = AssistantTurn(tool_calls=(ToolCall(id="x", name="edit_file", arguments="{not json"),))
    good = AssistantTurn(tool_calls=(call(1, "write_file", path="a.py", content=""),))

    assert files_touched([bad, good]) == ["a.py"]
