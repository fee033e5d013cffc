"""Blocks of a trajectory page: long texts, diffs, and the entries of events outside tool calls.

Any event kind without a rendering of its own still shows, as a table of its fields.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from kestrel.evals.html_page import DASH, Markup, Node, join, money, seconds, tag
from kestrel.protocol.events import (
    BudgetNotice,
    BudgetWarning,
    ChangesApplied,
    ChangesReady,
    CheckpointCreated,
    ContextAdded,
    ErrorOccurred,
    Event,
    HookRan,
    LoopDetected,
    ModelRetrying,
    PromptBlocked,
    Rewound,
    SessionFinished,
    SessionResumed,
    VerificationFinished,
)

PREVIEW_LINES = 12
"""Lines of a long text shown before the rest folds into `<details>`."""
PREVIEW_CHARS = 2_000
MAX_CHARS = 200_000
"""Longest text put on the page whole; the log keeps the rest (`kestrel sessions export`)."""


def entry(kind: str, heading: str, stamp: str, body: Node) -> Markup:
    head = tag("div", tag("h3", heading), tag("span", stamp, class_="muted stamp"), class_="head")
    return tag("section", head, body, class_=f"entry {kind}", data_kind=kind.split()[0])


def hook_line(h: HookRan) -> Markup:
    css = "ok" if h.outcome == "ok" else "warn"
    line = f"hook {h.hook_event} · {h.command} · {h.outcome}"
    return tag("div", tag("span", line, class_=f"badge {css}"), " ", h.message, class_="hook")


def diff_block(path: str, diff: str) -> Markup:
    lines = []
    for line in diff.splitlines()[: MAX_CHARS // 40]:
        if line.startswith(("+++", "---")):
            css = "meta"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        else:
            css = "ctx"
        lines.append(tag("span", line or " ", class_=css))
    body: Node = tag("pre", lines, class_="diff") if lines else tag("p", "(no diff recorded)")
    return tag(
        "div", tag("div", "changed ", tag("code", path), class_="muted"), body, class_="change"
    )


def text_block(text: str) -> Markup:
    return tag("div", long_text(text, pre=False), class_="text")


def long_text(text: str, *, pre: bool = True) -> Markup:
    """The text whole when short; else its first lines, and the rest behind `<details>`."""
    box = "pre" if pre else "div"
    lines = text.splitlines()
    if len(lines) <= PREVIEW_LINES and len(text) <= PREVIEW_CHARS:
        return tag(box, text, class_="plain")
    preview = "\n".join(lines[:PREVIEW_LINES])[:PREVIEW_CHARS]
    whole = text[:MAX_CHARS]
    cut = (
        tag("p", f"… {len(text) - MAX_CHARS:,} more characters in the log", class_="muted")
        if len(text) > MAX_CHARS
        else None
    )
    summary = f"show all {len(lines):,} lines ({len(text):,} characters)"
    return join(
        tag(box, preview + "\n…", class_="plain preview"),
        tag("details", tag("summary", summary), tag(box, whole, class_="plain"), cut),
    )


def other_entry(event: Event, stamp: str, diffs: Mapping[str, Sequence[str]]) -> Markup:
    """The entry of an event that belongs to no tool call; `diffs` are each path's edits."""
    match event:
        case CheckpointCreated():
            return entry("checkpoint", f"Checkpoint: {event.label}", stamp, _checkpoint(event))
        case Rewound():
            text = (
                f"Files restored to checkpoint {event.checkpoint_id[:12]} (event #{event.to_seq})."
            )
            return entry("rewound warn", "Rewound", stamp, tag("p", text))
        case VerificationFinished():
            word = "passed" if event.ok else "failed"
            heading = f"Verification round {event.round}: {word}"
            return entry(f"verify {'ok' if event.ok else 'bad'}", heading, stamp, _verify(event))
        case ChangesReady():
            return entry("change", f"Change ready: {event.summary}", stamp, _ready(event, diffs))
        case ChangesApplied():
            return entry("change", f"Change {event.outcome}", stamp, _applied(event))
        case ModelRetrying():
            text = (
                f"attempt {event.attempt}, waits {event.delay_s:.1f} s · "
                f"{event.error_kind}: {event.message}"
            )
            return entry("retry warn", "Model call retried", stamp, tag("p", text))
        case BudgetWarning():
            text = f"{event.budget}: {event.used:g} used of {event.limit:g}"
            return entry("budget warn", "Budget warning", stamp, tag("p", text))
        case BudgetNotice():
            return entry("budget warn", "Budget notice", stamp, tag("p", event.detail))
        case LoopDetected():
            text = f"{event.pattern} · {event.action}: {event.detail}"
            return entry("loop warn", "Loop detected", stamp, tag("p", text))
        case HookRan():
            return entry("hook", f"Hook {event.hook_event}", stamp, hook_line(event))
        case ContextAdded():
            return entry("context", f"Context added: {event.source}", stamp, long_text(event.text))
        case PromptBlocked():
            return entry("blocked bad", "Prompt blocked by a hook", stamp, tag("p", event.reason))
        case ErrorOccurred():
            kind = "recoverable error" if event.recoverable else "error"
            body = long_text(f"{event.error_kind}: {event.message}")
            return entry("error bad", f"{kind.capitalize()}", stamp, body)
        case SessionResumed():
            text = f"Picked up after event #{event.from_seq}"
            if event.interrupted_calls:
                text += "; interrupted calls: " + ", ".join(event.interrupted_calls)
            return entry("resumed", "Session resumed", stamp, tag("p", text))
        case SessionFinished():
            return entry("finished", f"Session finished: {event.reason}", stamp, _finished(event))
    return _generic(event, stamp)


def _generic(event: Event, stamp: str) -> Markup:
    """A kind this page has no special view for: its fields, so nothing in the log is hidden."""
    fields = dataclasses.asdict(event)
    kind = str(fields.pop("type", "event"))
    rows = [
        tag("tr", tag("th", key), tag("td", long_text(_plain(value))))
        for key, value in fields.items()
    ]
    heading = kind.replace("_", " ").capitalize()
    return entry("other", heading, stamp, tag("table", rows, class_="args"))


def _plain(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _files(files: Sequence[tuple[str, str]]) -> Markup:
    return tag("ul", [tag("li", tag("code", status), " ", path) for status, path in files])


def _checkpoint(event: CheckpointCreated) -> Markup:
    changed = [
        (c.status, f"{c.old_path} → {c.path}" if c.old_path else c.path) for c in event.changes
    ]
    more = f"… and {event.more_changes} more" if event.more_changes else None
    base = " (baseline)" if event.baseline else ""
    return join(
        tag("p", f"{event.checkpoint_id[:12]}{base}", class_="muted"),
        _files(changed) if changed else None,
        tag("p", more) if more else None,
    )


def _verify(event: VerificationFinished) -> Markup:
    checks = [
        tag("tr", tag("td", c.name), tag("td", c.status), tag("td", c.failures, class_="num"))
        for c in event.checks
    ]
    failures = [
        tag(
            "li",
            tag("code", f"{f.kind}/{f.tool}"),
            " ",
            ":".join(str(x) for x in (f.file, f.line) if x is not None),
            f" {f.test}" if f.test else "",
            " — ",
            f.message,
        )
        for f in event.failures
    ]
    head = tag("tr", tag("th", "check"), tag("th", "status"), tag("th", "failures", class_="num"))
    return join(
        tag("p", "paths: " + ", ".join(event.paths), class_="muted") if event.paths else None,
        tag("table", head, checks) if checks else None,
        tag("ul", failures) if failures else None,
        tag("details", tag("summary", "report the model saw"), tag("pre", event.report))
        if event.report
        else None,
    )


def _ready(event: ChangesReady, diffs: Mapping[str, Sequence[str]]) -> Markup:
    parts: list[Node] = [_files([(f.status, f.path) for f in event.files])]
    parts += [tag("p", "⚠ " + flag, class_="warn") for flag in event.flagged]
    for f in event.files:
        if f.path in diffs:
            summary = f"edits to {f.path} during the session ({len(diffs[f.path])})"
            edits = [diff_block(f.path, d) for d in diffs[f.path]]
            parts.append(tag("details", tag("summary", summary), edits))
    return join(*parts)


def _applied(event: ChangesApplied) -> Markup:
    lines = [
        f"written: {', '.join(event.written) or DASH}",
        f"deleted: {', '.join(event.deleted) or DASH}",
    ]
    if event.merged:
        lines.append(f"merged with the person's edits: {', '.join(event.merged)}")
    return join(
        tag("ul", [tag("li", line) for line in lines]),
        tag("ul", [tag("li", p, class_="warn") for p in event.problems])
        if event.problems
        else None,
    )


def _finished(event: SessionFinished) -> Markup:
    t = event.totals
    line = (
        f"{t.turns} turns · {t.tool_calls} tool calls · {t.input_tokens:,} input, "
        f"{t.output_tokens:,} output, {t.cache_read_tokens:,} cache read tokens · "
        f"{money(t.cost_usd)} · {seconds(t.wall_s)}"
    )
    return join(
        tag("p", event.detail) if event.detail else None,
        tag("p", line, class_="muted"),
        text_block(event.final_text) if event.final_text else None,
    )


TIMELINE_CSS = """
.timeline { border-left:3px solid var(--line); padding-left:14px; }
.entry { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:10px 14px; margin:10px 0; }
.entry .head { display:flex; justify-content:space-between; gap:12px; align-items:baseline; }
.entry.turn { border-left:4px solid var(--info); }
.entry.warn { border-left:4px solid var(--warn); }
.entry.bad { border-left:4px solid var(--bad); }
.entry.ok, .entry.finished { border-left:4px solid var(--ok); }
.entry.person { border-left:4px solid #7a4cc2; }
.text .plain { white-space:pre-wrap; margin:6px 0; }
.call { border:1px solid var(--line); border-radius:6px; padding:8px 10px; margin:8px 0;
  background:#fbfcfd; }
.call.bad { border-color:#f1b8b2; } .call.warn { border-color:#f0d58c; }
.call-head { display:flex; gap:8px; align-items:center; margin-bottom:4px; }
.tool-name { font-weight:700; font-size:13px; }
table.args { width:auto; min-width:40%; background:transparent; }
table.args th { width:1%; white-space:nowrap; background:transparent; }
table.args td pre { margin:0; }
.permission, .hook { margin:4px 0; }
.result.error pre { background:var(--bad-bg); }
.warn { color:var(--warn); }
.usage { margin:2px 0 6px; font-size:12px; }
"""
