"""A session's event log as one self-contained HTML page: a readable, step-by-step timeline.

Works on any session, finished or not: each model turn with its text, its tool calls (arguments,
permission, hooks, diffs, result), then checkpoints, verification, the change and the totals.
Streamed deltas and output chunks are folded into the reply or result they belong to, and shown
on their own only when the log ends before that reply or result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from kestrel.evals.html_events import (
    TIMELINE_CSS,
    diff_block,
    entry,
    hook_line,
    long_text,
    other_entry,
    text_block,
)
from kestrel.evals.html_page import Markup, Node, count, join, money, page, seconds, tag
from kestrel.evals.html_plots import columns
from kestrel.protocol.events import (
    Event,
    FileChanged,
    HookRan,
    InjectionFlagged,
    ModelCompleted,
    ModelRequestStarted,
    ModelTextDelta,
    ModelToolCallDelta,
    PermissionDecided,
    Record,
    SessionFinished,
    SessionStarted,
    ToolCallRequested,
    ToolFinished,
    ToolOutputChunk,
    ToolStarted,
    Totals,
    UserMessage,
)
from kestrel.protocol.messages import ToolCall


@dataclass(slots=True)
class _Call:
    """Everything the log says about one tool call."""

    requested: ToolCallRequested | None = None
    permission: PermissionDecided | None = None
    started: bool = False
    chunks: list[str] = field(default_factory=list)
    changes: list[FileChanged] = field(default_factory=list)
    hooks: list[HookRan] = field(default_factory=list)
    flags: list[InjectionFlagged] = field(default_factory=list)
    finished: ToolFinished | None = None


@dataclass(slots=True)
class _Log:
    """The records plus indexes that fold the stream into turns and calls."""

    records: list[tuple[int, float | None, Event]]
    calls: dict[str, _Call] = field(default_factory=dict)
    completed: dict[str, ModelCompleted] = field(default_factory=dict)
    partial: dict[str, list[str]] = field(default_factory=dict)
    start_at: float | None = None
    started: SessionStarted | None = None
    finished: SessionFinished | None = None


def _index(items: Iterable[Record | Event]) -> _Log:
    records: list[tuple[int, float | None, Event]] = [
        (item.seq, item.at, item.event) if isinstance(item, Record) else (i, None, item)
        for i, item in enumerate(items, start=1)
    ]
    log = _Log(records=records)
    for _, at, event in records:
        if log.start_at is None and at is not None:
            log.start_at = at
        match event:
            case SessionStarted() if log.started is None:
                log.started = event
            case SessionFinished():
                log.finished = event
            case ModelCompleted():
                log.completed[event.request_id] = event
            case ModelTextDelta():
                log.partial.setdefault(event.request_id, []).append(event.text)
            case ToolCallRequested():
                log.calls.setdefault(event.call.id, _Call()).requested = event
            case PermissionDecided():
                log.calls.setdefault(event.call_id, _Call()).permission = event
            case ToolStarted():
                log.calls.setdefault(event.call_id, _Call()).started = True
            case ToolOutputChunk():
                log.calls.setdefault(event.call_id, _Call()).chunks.append(event.text)
            case FileChanged():
                log.calls.setdefault(event.call_id, _Call()).changes.append(event)
            case HookRan(call_id=str(call_id)):
                log.calls.setdefault(call_id, _Call()).hooks.append(event)
            case InjectionFlagged():
                log.calls.setdefault(event.call_id, _Call()).flags.append(event)
            case ToolFinished():
                log.calls.setdefault(event.call_id, _Call()).finished = event
    return log


def render_trajectory(
    events: Iterable[Record | Event], *, title: str | None = None, back_href: str | None = None
) -> str:
    """The session's log (records, or bare events) as a self-contained HTML page."""
    log = _index(events)
    heading = title or (f"Session {log.started.session_id}" if log.started else "Session")
    body: list[Node] = []
    if back_href is not None:
        body.append(tag("p", tag("a", "← back to the report", href=back_href)))
    body += [tag("h1", heading), _header(log), _figures(log), _turn_chart(log)]
    body += [tag("h2", "Timeline"), tag("div", _timeline(log), class_="timeline")]
    return page(heading, [tag("main", body)], extra_css=TIMELINE_CSS)


def _header(log: _Log) -> Markup:
    s = log.started
    if s is None:
        return tag("p", "The log has no session_started event.", class_="muted")
    limits = ", ".join(
        f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in (
            ("turns", s.limits.max_turns),
            ("tokens", s.limits.max_tokens),
            ("dollars", s.limits.max_cost_usd),
            ("seconds", s.limits.max_wall_s),
        )
        if value is not None
    )
    meta = f"{s.model} · mode {s.permission_mode} · {s.cwd} · limits: {limits or 'none'}" + (
        f" · kestrel {s.kestrel_version}" if s.kestrel_version else ""
    )
    return join(
        tag("p", meta, class_="muted"),
        tag("div", tag("h3", "Task"), text_block(s.task), class_="card task"),
    )


def _usage_totals(log: _Log) -> Totals:
    """The last `session_finished` totals, or what the model calls in the log add up to."""
    if log.finished is not None:
        return log.finished.totals
    usages = [c.usage for c in log.completed.values()]
    return Totals(
        turns=len(usages),
        tool_calls=sum(1 for c in log.calls.values() if c.requested is not None),
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_write_tokens=sum(u.cache_write_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        cost_usd=sum(u.cost_usd for u in usages),
    )


def _any_estimated(log: _Log) -> bool:
    """Whether some model call's server reported no usage, so its tokens are estimates."""
    return any(not c.usage.tokens_reported for c in log.completed.values())


def _figures(log: _Log) -> Markup:
    t = _usage_totals(log)
    unpriced = any(not c.usage.priced for c in log.completed.values())
    estimated = " (estimated)" if t.tokens_estimated or _any_estimated(log) else ""
    outcome = log.finished.reason if log.finished else "not finished"
    items = [
        ("outcome", outcome),
        ("turns", count(t.turns)),
        ("tool calls", count(t.tool_calls)),
        ("input tokens" + estimated, count(t.input_tokens)),
        ("output tokens" + estimated, count(t.output_tokens)),
        ("cache read tokens", count(t.cache_read_tokens)),
        ("cost" + (" (unpriced model)" if unpriced else ""), money(t.cost_usd)),
        ("wall time", seconds(t.wall_s if log.finished else None)),
    ]
    return tag(
        "div",
        [
            tag(
                "div", tag("div", v, class_="value"), tag("div", k, class_="label"), class_="figure"
            )
            for k, v in items
        ],
        class_="figures",
        data_section="totals",
    )


def _turn_chart(log: _Log) -> Markup:
    items = []
    for i, done in enumerate(log.completed.values(), start=1):
        u = done.usage
        tokens = u.total_input_tokens + u.output_tokens
        items.append((str(i), float(tokens), f"turn {i}: {tokens:,} tokens, {money(u.cost_usd)}"))
    if not items:
        return Markup("")
    return tag(
        "div",
        columns(items, kind="turn-tokens", caption="Tokens per turn (input + output)"),
        class_="plots",
    )


def _timeline(log: _Log) -> list[Node]:
    out: list[Node] = []
    shown_calls: set[str] = set()
    diffs: dict[str, list[str]] = {}
    for call in log.calls.values():
        for change in call.changes:
            diffs.setdefault(change.path, []).append(change.diff)
    turns = {e.request_id: e for _, _, e in log.records if isinstance(e, ModelRequestStarted)}
    task = log.started.task if log.started else None
    for seq, at, event in log.records:
        stamp = _stamp(seq, at, log.start_at)
        match event:
            case SessionStarted() | ModelTextDelta() | ModelToolCallDelta() | ToolStarted():
                continue
            case UserMessage() if event.text == task and task is not None:
                task = None  # The task is shown at the top; a repeat later is a follow-up.
            case UserMessage():
                out.append(entry("person", "The person wrote", stamp, text_block(event.text)))
            case ModelRequestStarted() if event.request_id not in log.completed:
                text = "".join(log.partial.get(event.request_id, []))
                note = tag("p", "The log ends before this model call's reply.", class_="muted")
                body = join(note, text_block(text) if text else None)
                out.append(entry("turn warn", f"Turn {event.turn}: no reply", stamp, body))
            case ModelCompleted():
                started = turns.get(event.request_id)
                out.append(_turn(event, started, stamp, log, shown_calls))
            case ToolCallRequested() if event.call.id not in shown_calls:
                shown_calls.add(event.call.id)
                out.append(_call_card(event.call, log.calls[event.call.id]))
            case ToolCallRequested() | ModelRequestStarted():
                continue
            case InjectionFlagged(call_id=""):
                # Not a tool's result (the first context's list): shown where it happened.
                body = tag("p", "; ".join(event.findings), class_="warn")
                heading = f"⚠ {event.name} returned text aimed at the agent"
                out.append(entry("warn", heading, stamp, body))
            case HookRan(call_id=str()) | InjectionFlagged():
                continue
            case PermissionDecided() | ToolOutputChunk() | FileChanged() | ToolFinished():
                continue
            case _:
                out.append(other_entry(event, stamp, diffs))
    return out


def _stamp(seq: int, at: float | None, start: float | None) -> str:
    offset = f" · +{at - start:.1f} s" if at is not None and start is not None else ""
    return f"#{seq}{offset}"


def _turn(
    done: ModelCompleted,
    started: ModelRequestStarted | None,
    stamp: str,
    log: _Log,
    shown_calls: set[str],
) -> Markup:
    u = done.usage
    number = started.turn if started else "?"
    usage = (
        f"{u.input_tokens:,} in · {u.output_tokens:,} out · {u.cache_read_tokens:,} cache read · "
        f"{u.cache_write_tokens:,} cache write · {money(u.cost_usd)}"
        + ("" if u.priced else " (unpriced)")
        + ("" if u.tokens_reported else " (estimated tokens: the server reported none)")
        + f" · {seconds(u.latency_ms / 1000)} · {done.stop_reason}"
    )
    parts: list[Node] = [tag("p", usage, class_="usage muted")]
    if done.message.text:
        parts.append(text_block(done.message.text))
    for call in done.message.tool_calls:
        shown_calls.add(call.id)
        parts.append(_call_card(call, log.calls.get(call.id, _Call())))
    model = started.model if started else u.model
    return entry("turn", f"Turn {number} · {model}", stamp, parts)


def _call_card(call: ToolCall, info: _Call) -> Markup:
    status, css = _call_status(info)
    head_bits: list[Node] = [
        tag("code", call.name, class_="tool-name"),
        " ",
        tag("span", status, class_=f"badge {css}"),
    ]
    done = info.finished
    if done is not None:
        extra = [f"{done.duration_ms / 1000:.2f} s"]
        if done.exit_code is not None:
            extra.append(f"exit {done.exit_code}")
        head_bits.append(tag("span", " · ".join(extra), class_="muted"))
    parts: list[Node] = [tag("div", head_bits, class_="call-head"), _arguments(call.arguments)]
    if info.permission is not None:
        parts.append(_permission(info.permission))
    parts += [hook_line(h) for h in info.hooks]
    parts += [diff_block(change.path, change.diff) for change in info.changes]
    if done is not None:
        parts.append(_result(done))
    elif info.chunks:
        parts.append(tag("p", "Output so far (the call did not finish):", class_="muted"))
        parts.append(long_text("".join(info.chunks)))
    for flag in info.flags:
        parts.append(
            tag("p", "⚠ text aimed at the agent: " + "; ".join(flag.findings), class_="warn")
        )
    return tag("div", parts, class_=f"call {css}", data_call=call.id)


def _call_status(info: _Call) -> tuple[str, str]:
    if info.permission is not None and info.permission.decision == "deny":
        return "denied", "bad"
    done = info.finished
    if done is None:
        return ("running when the log ends" if info.started else "not run"), "warn"
    if done.interrupted:
        return "interrupted", "warn"
    return ("error", "bad") if done.is_error else ("ok", "ok")


def _arguments(raw: str) -> Markup:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return join(tag("p", "Arguments (not valid JSON):", class_="muted"), long_text(raw))
    if not isinstance(value, dict):
        return long_text(raw)
    rows = []
    for key, item in value.items():
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, indent=1)
        cell: Node = long_text(text) if "\n" in text or len(text) > 100 else tag("code", text)
        rows.append(tag("tr", tag("th", key), tag("td", cell)))
    return tag("table", rows, class_="args") if rows else Markup("")


def _permission(p: PermissionDecided) -> Markup:
    css = "ok" if p.decision == "allow" else "bad"
    words = (
        f"{p.decision}ed by {p.decided_by}"
        if p.decision == "allow"
        else f"denied by {p.decided_by}"
    )
    bits: list[Node] = [tag("span", words, class_=f"badge {css}"), " ", p.reason]
    if p.asked:
        bits.append(tag("span", f" · asked: {p.asked}", class_="muted"))
    if p.updated_arguments is not None:
        bits.append(tag("div", "A hook replaced the arguments:", class_="muted"))
        bits.append(long_text(p.updated_arguments))
    return tag("div", bits, class_="permission")


def _result(done: ToolFinished) -> Markup:
    notes = []
    if done.truncated:
        where = f" (whole output: {done.full_output_path})" if done.full_output_path else ""
        notes.append(tag("p", f"The tool cut this output short{where}.", class_="muted"))
    css = "result error" if done.is_error else "result"
    return tag(
        "div", tag("div", "result", class_="muted"), long_text(done.content), notes, class_=css
    )
