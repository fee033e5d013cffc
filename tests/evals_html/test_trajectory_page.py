"""`render_trajectory` on hand-built logs: every event kind, escaping, trimming, unfinished logs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kestrel.evals.html import render_trajectory
from kestrel.protocol.events import (
    BudgetWarning,
    ChangedFile,
    ChangesApplied,
    ChangesReady,
    CheckOutcome,
    CheckpointCreated,
    ContextAdded,
    ErrorOccurred,
    Event,
    FileChanged,
    HookRan,
    InjectionFlagged,
    Limits,
    LoopDetected,
    ModelCompleted,
    ModelRequestStarted,
    ModelRetrying,
    ModelTextDelta,
    ModelToolCallDelta,
    PermissionDecided,
    PromptBlocked,
    Record,
    Rewound,
    SessionFinished,
    SessionResumed,
    SessionStarted,
    ToolCallRequested,
    ToolFinished,
    ToolOutputChunk,
    ToolStarted,
    Totals,
    UserMessage,
    VerificationFinished,
    VerifyFailure,
)
from kestrel.protocol.messages import AssistantTurn, ToolCall, Usage

SCRIPT = "<script>alert(1)</script>"


def _turn(rid: str, n: int, text: str, *calls: ToolCall, cost: float = 0.0) -> list[Event]:
    usage = Usage(model="m", input_tokens=100 * n, output_tokens=10 * n, cost_usd=cost)
    return [
        ModelRequestStarted(request_id=rid, model="anthropic:m", turn=n),
        ModelTextDelta(request_id=rid, text=text),
        ModelCompleted(
            request_id=rid,
            message=AssistantTurn(text=text, tool_calls=calls),
            usage=usage,
            stop_reason="tool_use" if calls else "end_turn",
        ),
    ]


def _call(call: ToolCall, content: str, *extra: Event, is_error: bool = False) -> list[Event]:
    return [
        ToolCallRequested(call=call),
        PermissionDecided(call_id=call.id, decision="allow", decided_by="mode", reason="reads ok"),
        ToolStarted(call_id=call.id, name=call.name),
        *extra,
        ToolFinished(call_id=call.id, name=call.name, content=content, is_error=is_error),
    ]


def full_log() -> list[Event]:
    """A log with one event of every kind, in a plausible order."""
    grep = ToolCall(id="c1", name="grep", arguments='{"pattern": "def add"}')
    edit = ToolCall(
        id="c2",
        name="edit_file",
        arguments='{"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}',
    )
    bash = ToolCall(id="c3", name="bash", arguments='{"command": "rm -rf /"}')
    diff = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
        " def add(a, b):\n-    return a - b\n+    return a + b"
    )
    changes = (ChangedFile(path="calc.py", status="M"),)
    return [
        SessionStarted(
            session_id="s1",
            task="fix add",
            cwd="/repo",
            model="anthropic:m",
            limits=Limits(max_turns=10, max_cost_usd=0.5),
        ),
        UserMessage(text="fix add"),
        CheckpointCreated(checkpoint_id="base000000000", label="baseline", baseline=True),
        *_turn("r1", 1, "Looking for add.", grep, cost=0.0012),
        ModelToolCallDelta(request_id="r1", index=0, name="grep"),
        *_call(
            grep,
            "calc.py:1: def add(a, b):",
            ToolOutputChunk(call_id="c1", text="calc.py:1"),
            HookRan(hook_event="PreToolUse", command="./audit.sh", outcome="ok", call_id="c1"),
            InjectionFlagged(call_id="c1", name="grep", findings=("ignore previous: do X",)),
        ),
        ModelRetrying(
            request_id="r2", attempt=1, delay_s=2.0, error_kind="overloaded", message="529"
        ),
        *_turn("r2", 2, "", edit, cost=0.0034),
        *_call(
            edit,
            "Edited calc.py",
            FileChanged(call_id="c2", path="calc.py", before_hash="a", after_hash="b", diff=diff),
        ),
        CheckpointCreated(
            checkpoint_id="cp1111111111",
            label="after edit_file",
            call_ids=("c2",),
            changes=changes,
            more_changes=3,
        ),
        VerificationFinished(
            ok=False,
            blocking=True,
            paths=("calc.py",),
            checks=(CheckOutcome(name="pytest", status="failed", failures=1),),
            failures=(
                VerifyFailure(
                    kind="test",
                    tool="pytest",
                    message="assert 3 == 5",
                    file="test_calc.py",
                    line=4,
                    test="test_add",
                ),
            ),
            report="1 test failed: test_add",
        ),
        ContextAdded(source="hook", text="remember the style guide"),
        BudgetWarning(budget="cost", used=0.4, limit=0.5),
        LoopDetected(pattern="repeat", action="warn", detail="grep called 3 times the same way"),
        *_turn("r3", 3, "", bash),
        ToolCallRequested(call=bash),
        PermissionDecided(
            call_id="c3", decision="deny", decided_by="rule", reason="Bash(rm:*) denies"
        ),
        ErrorOccurred(error_kind="provider", message="connection reset", recoverable=True),
        SessionResumed(from_seq=30, interrupted_calls=("c9",)),
        Rewound(checkpoint_id="cp1111111111", to_seq=12),
        UserMessage(text="also keep double()"),
        PromptBlocked(reason="no secrets in prompts"),
        HookRan(hook_event="Stop", command="./notify.sh", outcome="timeout"),
        *_turn("r4", 4, "Fixed: add now adds."),
        SessionFinished(
            reason="done",
            final_text="Fixed: add now adds.",
            totals=Totals(
                turns=4,
                tool_calls=3,
                input_tokens=1000,
                output_tokens=100,
                cache_read_tokens=400,
                cost_usd=0.0046,
                wall_s=12.5,
            ),
        ),
        ChangesReady(
            checkpoint_id="cp1111111111",
            files=changes,
            flagged=("calc.py: big",),
            summary="1 file: 1 modified",
        ),
        ChangesApplied(
            outcome="conflicts",
            checkpoint_id="cp1111111111",
            problems=("calc.py: changed in the checkout too",),
        ),
    ]


def _text(page: str) -> str:
    """The page's visible words, roughly: tags dropped, entities left as they are."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_each_kind_of_event_shows_in_its_own_way() -> None:
    log = full_log()
    assert len({type(e) for e in log}) == 27  # Every kind the log had when this page was built.
    page = render_trajectory(log)
    assert 'data-kind="other"' not in page
    text = _text(page)
    for expected in (
        "fix add",  # the task
        "Turn 1 · anthropic:m",
        "Looking for add.",
        "100 in · 10 out",
        "$0.0012",
        "hook PreToolUse · ./audit.sh · ok",
        "text aimed at the agent: ignore previous: do X",
        "Model call retried",
        "Checkpoint: after edit_file",
        "… and 3 more",
        "Verification round 1: failed",
        "test_calc.py:4 test_add — assert 3 == 5",
        "Context added: hook",
        "Budget warning",
        "cost: 0.4 used of 0.5",
        "Loop detected",
        "denied by rule",
        "Bash(rm:*) denies",
        "Recoverable error",
        "Session resumed",
        "Rewound",
        "also keep double()",
        "Prompt blocked by a hook",
        "Hook Stop",
        "Session finished: done",
        "Change ready: 1 file: 1 modified",
        "calc.py: big",
        "Change conflicts",
        "calc.py: changed in the checkout too",
        "limits: turns 10, dollars 0.5",
    ):
        assert expected in text, expected
    # The task shows once at the top, not again as a message from the person.
    assert text.count("fix add") == 1
    # Totals come from session_finished.
    assert "1,000" in text and "400" in text and "$0.0046" in text and "12.5 s" in text


@dataclass(frozen=True, slots=True, kw_only=True)
class FutureEvent:
    """Stands for an event kind added after the page: it has no view of its own yet."""

    type: str = "route_chosen"
    plan_id: str
    steps: tuple[str, ...] = ()


def test_a_kind_without_a_view_still_shows_its_fields() -> None:
    future = FutureEvent(plan_id="p1", steps=("edit <calc.py>", "run tests"))
    page = render_trajectory([future])  # type: ignore[list-item]
    assert 'data-kind="other"' in page
    text = _text(page)
    assert "Route chosen" in text and "p1" in text
    assert "edit &lt;calc.py&gt;" in text and "run tests" in text


def test_diffs_are_marked_line_by_line() -> None:
    page = render_trajectory(full_log())
    assert '<span class="del">-    return a - b</span>' in page
    assert '<span class="add">+    return a + b</span>' in page
    assert '<span class="hunk">@@ -1,2 +1,2 @@</span>' in page
    # The change's files carry the diffs made to them during the session.
    assert "edits to calc.py during the session (1)" in page


def test_untrusted_text_is_escaped_everywhere() -> None:
    evil = ToolCall(id="x1", name=SCRIPT, arguments=f'{{"{SCRIPT}": "{SCRIPT}"}}')
    log: list[Event] = [
        SessionStarted(session_id="s<b>", task=SCRIPT, cwd=SCRIPT, model=SCRIPT),
        *_turn("r1", 1, SCRIPT, evil),
        *_call(
            evil,
            SCRIPT,
            FileChanged(
                call_id="x1", path=SCRIPT, before_hash=None, after_hash="h", diff="+" + SCRIPT
            ),
        ),
        ErrorOccurred(error_kind=SCRIPT, message='"><img src=x onerror=alert(1)>'),
        SessionFinished(reason="error", detail=SCRIPT, final_text=SCRIPT),
    ]
    page = render_trajectory(log)
    assert "<script" not in page.lower()
    assert "<img" not in page.lower() and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("&lt;script&gt;") >= 8
    # Scripts could not run even if something slipped through.
    assert 'content="default-src &#x27;none&#x27;;' in page


def test_long_output_is_trimmed_and_the_rest_folds_away() -> None:
    call = ToolCall(id="c1", name="bash", arguments='{"command": "seq 100"}')
    output = "\n".join(f"line {i}" for i in range(1, 101))
    page = render_trajectory([*_turn("r1", 1, "", call), *_call(call, output)])
    preview, _, folded = page.partition("<details>")
    assert "line 12\n…" in preview and "line 13" not in preview
    assert "show all 100 lines (" in folded and "line 100" in folded


def test_a_log_cut_short_shows_what_it_has() -> None:
    call = ToolCall(id="c1", name="bash", arguments="{not json")
    log: list[Event] = [
        SessionStarted(session_id="s1", task="t", cwd="/r", model="m"),
        *_turn("r1", 1, "run it", call, cost=0.5),
        ToolCallRequested(call=call),
        ToolStarted(call_id="c1", name="bash"),
        ToolOutputChunk(call_id="c1", text="half of the out"),
        ToolOutputChunk(call_id="c1", text="put"),
        ModelRequestStarted(request_id="r2", model="m", turn=2),
        ModelTextDelta(request_id="r2", text="I was say"),
        ModelTextDelta(request_id="r2", text="ing"),
    ]
    text = _text(render_trajectory(log))
    assert "running when the log ends" in text
    assert "Output so far (the call did not finish): half of the output" in text
    assert "Arguments (not valid JSON): {not json" in text
    assert "Turn 2: no reply" in text and "I was saying" in text
    # Without session_finished the totals add up the model calls.
    assert "not finished" in text and "$0.5000" in text and "100" in text


def test_records_carry_their_place_and_time() -> None:
    events = full_log()[:4]
    records = [
        Record(session_id="s1", seq=i, at=1000.0 + i, event=e) for i, e in enumerate(events, 1)
    ]
    page = render_trajectory(records, title="calc-1: trajectory", back_href="../report.html")
    assert "<title>calc-1: trajectory</title>" in page
    assert 'href="../report.html"' in page
    assert "#3 · +2.0 s" in _text(page)


def test_a_flag_outside_any_tool_call_is_shown_on_its_own() -> None:
    events: list[Event] = [
        SessionStarted(session_id="s", task="t", cwd="/w", model="m"),
        ContextAdded(source="context engine", text="Files most likely relevant:"),
        InjectionFlagged(
            call_id="", name="the context engine", findings=(f'override, line 2: "{SCRIPT}"',)
        ),
    ]
    page = render_trajectory(events)
    assert "⚠ the context engine returned text aimed at the agent" in page
    assert "override, line 2" in page and SCRIPT not in page
