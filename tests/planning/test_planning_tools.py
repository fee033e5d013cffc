"""The `todo` and `propose_plan` tools: what they record, and the errors a malformed call gets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kestrel.agent.prompt import task_list_block, with_task_list
from kestrel.protocol.events import PlanProposed, PlanStep, TodoItem, TodoUpdated
from kestrel.protocol.messages import AssistantTurn, ToolCall, ToolResultTurn, UserTurn
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools.base import PlannedWrite, ToolContext, ToolOutcome
from kestrel.tools.plan import PlanInvalid, ProposePlan, find_cycle, in_order, parse_plan
from kestrel.tools.registry import ToolRegistry
from kestrel.tools.todo import Todo


async def _no_write(write: PlannedWrite) -> None:
    raise AssertionError("planning tools never write files")


def run_call(tmp_path: Path, name: str, arguments: object) -> ToolOutcome:
    """Dispatch one call through a registry holding the two planning tools."""
    registry = ToolRegistry([Todo(), ProposePlan()])
    ctx = ToolContext(
        root=tmp_path,
        executor=LocalExecutor(),
        artifacts_dir=tmp_path / "artifacts",
        on_output=lambda stream, text: None,
        before_write=_no_write,
        call_id="call-7",
    )
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return asyncio.run(registry.dispatch(ToolCall(id="call-7", name=name, arguments=text), ctx))


def test_todo_records_the_whole_list(tmp_path: Path) -> None:
    items = [
        {"id": "1", "text": "read the parser", "status": "done"},
        {"id": "2", "text": "fix   the\nbug", "status": "in_progress"},
        {"id": "3", "text": "add a test"},
    ]
    outcome = run_call(tmp_path, "todo", {"items": items})
    assert not outcome.is_error
    assert outcome.content == "Task list updated (3 items: 1 done, 1 in progress, 1 pending)."
    assert outcome.events == (
        TodoUpdated(
            items=(
                TodoItem(id="1", text="read the parser", status="done"),
                TodoItem(id="2", text="fix the bug", status="in_progress"),
                TodoItem(id="3", text="add a test", status="pending"),
            ),
            source="model",
            call_id="call-7",
        ),
    )


def test_an_empty_todo_list_clears_it(tmp_path: Path) -> None:
    outcome = run_call(tmp_path, "todo", {"items": []})
    assert not outcome.is_error and outcome.events == (TodoUpdated(items=(), call_id="call-7"),)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
            "id 'a' is used by more than one item",
        ),
        (
            {
                "items": [
                    {"id": "a", "text": "x", "status": "in_progress"},
                    {"id": "b", "text": "y", "status": "in_progress"},
                ]
            },
            "2 items are in_progress ('a', 'b'); at most one may be",
        ),
        ({"items": [{"id": "a", "text": "x", "status": "started"}]}, "items.0.status"),
        ({"items": [{"id": "a"}]}, "items.0.text: missing (required)"),
        ({"items": [{"id": "a", "text": "   "}]}, "item 'a' has a blank text"),
        ({"items": "do everything"}, "items: Input should be a valid list"),
        ({"todos": []}, "todos: unknown argument"),
        ('{"items": [', "arguments for todo are not valid JSON"),
    ],
)
def test_a_malformed_todo_call_is_an_error_the_model_can_fix(
    tmp_path: Path, arguments: object, expected: str
) -> None:
    outcome = run_call(tmp_path, "todo", arguments)
    assert outcome.is_error and outcome.events == ()
    assert expected in outcome.content


def test_propose_plan_records_the_proposal(tmp_path: Path) -> None:
    steps = [
        {"id": "s1", "title": "Add the helper", "files": ["util.py"], "checks": ["pytest"]},
        {"id": "s2", "title": "Use it", "files": ["app.py"], "depends_on": ["s1"]},
    ]
    outcome = run_call(tmp_path, "propose_plan", {"summary": "Two steps.", "steps": steps})
    assert not outcome.is_error
    (proposed,) = outcome.events
    assert isinstance(proposed, PlanProposed)
    assert proposed.call_id == "call-7" and proposed.summary == "Two steps."
    assert proposed.steps == (
        PlanStep(id="s1", title="Add the helper", files=("util.py",), checks=("pytest",)),
        PlanStep(id="s2", title="Use it", files=("app.py",), depends_on=("s1",)),
    )
    assert f"Plan {proposed.plan_id} (2 steps) was submitted" in outcome.content


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            [{"id": "a", "title": "A", "depends_on": ["zz"]}],
            "step 'a' depends on 'zz', which is not a step of this plan (its steps are 'a')",
        ),
        (
            [
                {"id": "a", "title": "A", "depends_on": ["c"]},
                {"id": "b", "title": "B", "depends_on": ["a"]},
                {"id": "c", "title": "C", "depends_on": ["b"]},
            ],
            "steps depend on each other in a cycle: 'a' -> 'c' -> 'b' -> 'a'",
        ),
        ([{"id": "a", "title": "A", "depends_on": ["a"]}], "step 'a' depends on itself"),
        (
            [{"id": "a", "title": "A"}, {"id": "a", "title": "B"}],
            "step id 'a' is used more than once",
        ),
        ([], "steps: List should have at least 1 item"),
        ([{"id": "a"}], "steps.0.title: missing (required)"),
    ],
)
def test_a_plan_that_cannot_be_followed_is_an_error_the_model_can_fix(
    tmp_path: Path, steps: list[dict[str, object]], expected: str
) -> None:
    outcome = run_call(tmp_path, "propose_plan", {"steps": steps})
    assert outcome.is_error and outcome.events == ()
    assert expected in outcome.content


def test_steps_are_ordered_after_what_they_depend_on() -> None:
    steps = (
        PlanStep(id="test", title="T", depends_on=("code",)),
        PlanStep(id="code", title="C", depends_on=("schema",)),
        PlanStep(id="docs", title="D"),
        PlanStep(id="schema", title="S"),
    )
    assert [s.id for s in in_order(steps)] == ["docs", "schema", "code", "test"]
    assert find_cycle(steps) == []


def test_an_edited_plan_is_parsed_or_refused_with_every_problem() -> None:
    summary, steps = parse_plan([{"id": "x", "title": " Do  it ", "files": ["a.py", " "]}])
    assert summary == "" and steps == (PlanStep(id="x", title="Do it", files=("a.py",)),)
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(
            {
                "steps": [
                    {"id": "x", "title": "X", "depends_on": ["y"]},
                    {"id": "x", "title": "again"},
                ]
            }
        )
    assert str(caught.value).splitlines() == [
        "- step id 'x' is used more than once; ids must be unique",
        "- step 'x' depends on 'y', which is not a step of this plan (its steps are 'x', 'x')",
    ]
    with pytest.raises(PlanInvalid, match="steps: missing"):
        parse_plan({"summary": "no steps"})


ITEMS = (
    TodoItem(id="1", text="read the code", status="done"),
    TodoItem(id="2", text="fix it", status="in_progress"),
    TodoItem(id="3", text="test it"),
)
BLOCK = (
    "<task-list>\n"
    "The session's task list (keep it current with the todo tool):\n"
    "- [done] 1: read the code\n"
    "- [in_progress] 2: fix it\n"
    "- [pending] 3: test it\n"
    "</task-list>"
)


def test_the_task_list_block_is_exact_and_empty_without_a_list() -> None:
    assert task_list_block(ITEMS) == BLOCK
    assert task_list_block(()) == ""


def test_the_task_list_follows_the_latest_message_without_changing_earlier_ones() -> None:
    call = ToolCall(id="c1", name="read_file", arguments="{}")
    history = (
        UserTurn(text="task"),
        AssistantTurn(text="", tool_calls=(call,)),
        ToolResultTurn(call_id="c1", name="read_file", content="1\tx"),
    )
    shown = with_task_list(history, ITEMS)
    assert shown[:2] == history[:2]
    assert shown[2] == ToolResultTurn(call_id="c1", name="read_file", content=f"1\tx\n\n{BLOCK}")
    assert with_task_list(history[:1], ITEMS) == (UserTurn(text=f"task\n\n{BLOCK}"),)
    assert with_task_list(history[:2], ITEMS) == (*history[:2], UserTurn(text=BLOCK))
    assert with_task_list(history, ()) == history
