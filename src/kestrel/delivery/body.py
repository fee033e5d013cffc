"""A pull request's title, body and commit message, written from the session's log: the task,
the plan, the change by file, how it was verified, what it cost, and the trace of its steps."""

from __future__ import annotations

import json
from collections.abc import Sequence

from kestrel.protocol.events import (
    Event,
    ModelRequestStarted,
    PlanDecided,
    PlanProposed,
    SessionFinished,
    ToolCallRequested,
    ToolFinished,
    UserMessage,
    VerificationFinished,
)
from kestrel.protocol.events_base import Totals

MAX_TRACE = 60
_STATUS = {"failed": "FAILED", "timed_out": "timed out"}


def title(task: str) -> str:
    """The task's first line, at most 72 characters."""
    first = (task.strip().splitlines() or ["Kestrel's change"])[0]
    return first if len(first) <= 72 else first[:71] + "…"


def commit_message(task: str, session_id: str, body: str = "") -> str:
    """A commit message: the title, what the commit does, and trailers naming Kestrel."""
    text = body.strip() or task.strip()
    details = f"\n\n{text}" if text and text != title(task) else ""
    return (
        f"{title(task)}{details}\n\nKestrel-Session: {session_id}\n"
        "Co-authored-by: Kestrel <kestrel@localhost>\n"
    )


def pull_body(events: Sequence[Event], numstat: str, session_id: str) -> str:
    """The pull request's description, in Markdown."""
    task = next((e.text for e in events if isinstance(e, UserMessage)), "")
    finished = [e for e in events if isinstance(e, SessionFinished)]
    parts = [f"## Task\n\n{task.strip()}"]
    plan = _plan(events)
    if plan:
        parts.append("## Plan\n\n" + plan)
    summary = finished[-1].final_text.strip() if finished else ""
    parts.append("## Change\n\n" + (f"{summary}\n\n" if summary else "") + _files(numstat))
    parts.append("## Verification\n\n" + _verification(events))
    parts.append("## Cost\n\n" + _cost(events, finished[-1].totals if finished else Totals()))
    parts.append(_trace(events))
    parts.append(
        f"Made by Kestrel, session `{session_id}`. The whole log: "
        f"`kestrel sessions export {session_id}`."
    )
    return "\n\n".join(parts) + "\n"


def _plan(events: Sequence[Event]) -> str:
    decided = [e for e in events if isinstance(e, PlanDecided) and e.decision == "approved"]
    if not decided:
        return ""
    proposed = [
        e for e in events if isinstance(e, PlanProposed) and e.plan_id == decided[-1].plan_id
    ]
    steps = decided[-1].steps or (proposed[-1].steps if proposed else ())
    summary = proposed[-1].summary.strip() if proposed else ""
    lines = [f"{n}. {step.title}" for n, step in enumerate(steps, 1)]
    return "\n".join([summary, *lines]).strip()


def _files(numstat: str) -> str:
    rows = ["| file | added | removed |", "|---|---|---|"]
    for line in numstat.splitlines():
        added, removed, path = [*line.split("\t", 2), "", "", ""][:3]
        rows.append(f"| `{path}` | {added.replace('-', 'binary')} | {removed.replace('-', '')} |")
    return "\n".join(rows) if len(rows) > 2 else "(no file changed)"


def _verification(events: Sequence[Event]) -> str:
    rounds = [e for e in events if isinstance(e, VerificationFinished)]
    if not rounds:
        return "Not verified: no check ran on the change."
    last = rounds[-1]
    lines = [f"{'Passed' if last.ok else 'Failed'} (round {last.round} of {len(rounds)} run):"]
    lines += [
        f"- {check.name}: {_STATUS.get(check.status, check.status)}"
        + (f" ({check.failures} failures)" if check.failures else "")
        for check in last.checks
    ]
    lines += [f"  - {f.file or ''}:{f.line or ''} {f.message[:160]}" for f in last.failures[:10]]
    return "\n".join(lines)


def _cost(events: Sequence[Event], totals: Totals) -> str:
    models = sorted({e.model for e in events if isinstance(e, ModelRequestStarted) and e.model})
    share = totals.cache_read_tokens / totals.tokens if totals.tokens else 0.0
    cost = f"${totals.cost_usd:.4f}" + ("" if totals.cost_known else " or more")
    return (
        f"Model: {', '.join(models) or 'unknown'}. {totals.turns} model turns, "
        f"{totals.tool_calls} tool calls, {totals.tokens:,} tokens "
        f"({share:.0%} read from the cache), {cost}."
    )


def _trace(events: Sequence[Event]) -> str:
    started = {e.call.id: e.call for e in events if isinstance(e, ToolCallRequested)}
    lines: list[str] = []
    for event in events:
        if not isinstance(event, ToolFinished):
            continue
        call = started.get(event.call_id)
        shown = _arguments(call.arguments if call else "")
        mark = "failed" if event.is_error else "ok"
        lines.append(f"- `{event.name}` {shown} ({mark}, {event.duration_ms / 1000:.1f} s)")
    more = len(lines) - MAX_TRACE
    lines = lines[:MAX_TRACE] + ([f"- ... and {more} more"] if more > 0 else [])
    return (
        f"<details><summary>Trace: {len(started)} tool calls</summary>\n\n"
        + ("\n".join(lines) or "(none)")
        + "\n\n</details>"
    )


def _arguments(raw: str) -> str:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        value = raw
    text = value.get("command") or value.get("path") if isinstance(value, dict) else None
    shown = str(text if text is not None else json.dumps(value, ensure_ascii=False))
    shown = shown.replace("`", "'").replace("\n", " ")
    return f"`{shown[:80]}`" if shown and shown != "{}" else ""
