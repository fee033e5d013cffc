"""Frontends for the terminal: they subscribe to a session's events and print them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kestrel.cli import interrupts
from kestrel.cli.frontends import Frontend as Frontend
from kestrel.cli.frontends import QuietFrontend as QuietFrontend
from kestrel.cli.frontends import StreamJsonFrontend as StreamJsonFrontend
from kestrel.cli.render_plan import plan_lines, todo_lines
from kestrel.cli.usage_text import compact_count as _k
from kestrel.cli.usage_text import cost_text, tokens_text
from kestrel.protocol.events import (
    BudgetNotice,
    BudgetWarning,
    CancelRequested,
    ChangesApplied,
    ChangesReady,
    ContextAdded,
    ContextCompacted,
    ErrorOccurred,
    FileChanged,
    HookRan,
    InjectionFlagged,
    LoopDetected,
    LoopRecovered,
    ModelCompleted,
    ModelRetrying,
    ModelSwitched,
    ModelTextDelta,
    PermissionDecided,
    PlanDecided,
    PlanProposed,
    PromptBlocked,
    Record,
    SessionFinished,
    SessionResumed,
    SessionStarted,
    TodoUpdated,
    ToolCallRequested,
    ToolFinished,
    ToolOutputChunk,
    Totals,
    VerificationFinished,
)
from kestrel.protocol.messages import Usage

PREVIEW_LINES = 8


class ConsoleFrontend(Frontend):
    """The interactive view: streamed text, each tool call and result, diffs, and a footer."""

    def __init__(self, console: Console, *, resume_hint: bool = True) -> None:
        super().__init__()
        self.console = console
        self._resume_hint = resume_hint
        """Whether a cancelled session can be resumed from here (the demo's folder is gone)."""
        self._unverified: str | None = None
        """Why a verification of this run could not check the change."""
        self._in_text = False
        self._streamed: set[str] = set()
        self._spent = Totals()
        self._whole_session: bool | None = None
        """Whether the view saw the session from its start, so its spend is the session's."""

    def render(self, record: Record) -> None:
        """Print one event in a form a person reads at a glance."""
        event = record.event
        if self._whole_session is None:
            self._whole_session = isinstance(event, SessionStarted)
        if not isinstance(event, ModelTextDelta) and self._in_text:
            self.console.print()
            self._in_text = False
        match event:
            case SessionStarted():
                self.console.print(
                    f"[dim]session {event.session_id} · {event.model} · "
                    f"{escape(event.cwd)} · mode {event.permission_mode}[/dim]"
                )
            case SessionResumed():
                self.console.print(f"[dim]resumed after event {event.from_seq}[/dim]")
            case ModelTextDelta():
                self.console.print(Text(event.text), end="", soft_wrap=True)
                self._in_text = True
            case ToolCallRequested():
                self.console.print(Text.assemble(("● ", "cyan"), (_call_line(event), "bold")))
            case PermissionDecided(decision="deny"):
                self.console.print(f"  [red]✗ denied[/red] [dim]{escape(event.reason)}[/dim]")
            case PermissionDecided(decided_by="rule" | "hook"):
                self.console.print(f"  [dim]✓ {escape(event.reason)}[/dim]")
            case HookRan(outcome="error" | "timeout" | "crash" | "block"):
                self.console.print(
                    f"  [yellow]hook {event.hook_event} {event.outcome}: "
                    f"{escape(event.command)}[/yellow] [dim]{escape(event.message[:300])}[/dim]"
                )
            case InjectionFlagged():
                self.console.print(
                    f"  [yellow]⚠ {event.name} returned text aimed at the agent; commands now "
                    f"ask unless a rule allows them[/yellow] [dim]{escape(event.findings[0])}[/dim]"
                )
            case ContextAdded(source="verification"):
                pass  # Its report was just shown with `verification_finished`.
            case ContextAdded(usage=Usage() as used):
                spent = (
                    f"{used.input_tokens:,} tokens in, {used.output_tokens:,} out ({used.model})"
                )
                self.console.print(
                    f"[dim]{escape(event.source)} (reranking: {escape(spent)}): "
                    f"{escape(event.text[:300])}[/dim]"
                )
            case ContextAdded():
                self.console.print(f"[dim]{escape(event.source)}: {escape(event.text[:300])}[/dim]")
            case PromptBlocked():
                self.console.print(f"[red]prompt blocked by a hook: {escape(event.reason)}[/red]")
            case ToolOutputChunk():
                self._streamed.add(event.call_id)
                for line in event.text.splitlines():
                    self.console.print(Text("  │ " + line, style="dim"), soft_wrap=True)
            case FileChanged():
                self._streamed.add(event.call_id)
                self._diff(event)
            case ToolFinished(interrupted=True) if interrupts.received() is not None:
                pass  # The line that says the run was cancelled covers it.
            case ToolFinished():
                self._result(event)
            case ModelRetrying():
                self.console.print(
                    f"[yellow]  retrying in {event.delay_s:.1f} s "
                    f"({event.error_kind}: {escape(event.message)})[/yellow]"
                )
            case ModelSwitched():
                self.console.print(
                    f"[yellow]  {escape(event.from_model)} failed ({event.error_kind}); "
                    f"the {event.role} role goes on with {escape(event.to_model)}[/yellow]"
                )
            case BudgetWarning():
                self.console.print(
                    f"[yellow]budget: {event.budget} at {event.used:g} of {event.limit:g}[/yellow]"
                )
            case BudgetNotice():
                self.console.print(f"[yellow]budget: {escape(event.detail)}[/yellow]")
            case LoopDetected():
                self.console.print(f"[yellow]loop {event.action}: {escape(event.detail)}[/yellow]")
            case LoopRecovered():
                files = (
                    f"files restored to checkpoint {event.checkpoint_id[:12]}"
                    if event.checkpoint_id
                    else "files left as they were"
                )
                self.console.print(
                    f"[yellow]loop caught: {escape(event.detail)}; went back to event "
                    f"{event.to_seq} ({files}) and asked for a different approach[/yellow]"
                )
            case ErrorOccurred():
                self.console.print(f"[red]error: {escape(event.message)}[/red]")
            case SessionFinished():
                self._finished(event, record.session_id)
            case VerificationFinished():
                self._unverified = not_verified(event) or self._unverified
                style = "green" if event.ok else "yellow"
                for i, line in enumerate(event.report.splitlines()[: PREVIEW_LINES * 2]):
                    mark = ("✓ " if event.ok else "✗ ") if i == 0 else "  "
                    self.console.print(Text(mark + line, style=style))
            case ContextCompacted():
                self.console.print(
                    f"[dim]context compacted: {event.dropped} messages folded into a summary, "
                    f"~{_k(event.tokens_before)} → ~{_k(event.tokens_after)} tokens of "
                    f"{_k(event.window_tokens)}[/dim]"
                )
            case TodoUpdated():
                for line in todo_lines(event):
                    self.console.print(Text(line, style="cyan"), soft_wrap=True)
            case PlanProposed() | PlanDecided():
                for line in plan_lines(event):
                    self.console.print(Text(line, style="cyan"), soft_wrap=True)
            case ChangesReady() | ChangesApplied():
                for line in handoff_lines(event, record.session_id):
                    self.console.print(escape(line), soft_wrap=True)
            case CancelRequested():
                who = escape(event.by or "another process")
                self.console.print(f"[yellow]Stop asked by {who}.[/yellow]", soft_wrap=True)
            case ModelCompleted():
                self._spent = add_usage(self._spent, event)
                line = spend_line(self._spent, whole_session=bool(self._whole_session))
                self.console.print(Text(line, style="dim"))

    def _finished(self, event: SessionFinished, session_id: str) -> None:
        """The final summary: how the run was stopped (when a signal stopped it), whether the
        change went unverified, then the footer."""
        if event.reason == "cancelled" and interrupts.received() is not None:
            line = interrupts.stopped_line(session_id if self._resume_hint else None)
            self.console.print(Text(line, style="bold yellow"), soft_wrap=True)
            interrupts.mark_said()
        elif self._unverified is not None:
            self.console.print(Text(f"⚠ {self._unverified}", style="bold yellow"), soft_wrap=True)
        self.console.print(footer(event, session_id), style="dim")

    def _diff(self, event: FileChanged) -> None:
        self.console.print(f"  [dim]changed {escape(event.path)}[/dim]")
        for line in event.diff.splitlines()[:60]:
            style = (
                "green"
                if line.startswith("+") and not line.startswith("+++")
                else "red"
                if line.startswith("-") and not line.startswith("---")
                else "dim"
            )
            self.console.print(Text("    " + line, style=style), soft_wrap=True)

    def _result(self, event: ToolFinished) -> None:
        status = "red" if event.is_error else "dim"
        if event.call_id in self._streamed:
            first = event.content.splitlines()[0] if event.content else "done"
            summary = f"exit {event.exit_code}" if event.exit_code is not None else first
            self.console.print(
                f"  [{status}]⎿ {summary} ({event.duration_ms / 1000:.1f} s)[/{status}]"
            )
            return
        lines = event.content.splitlines() or [""]
        for i, line in enumerate(lines[:PREVIEW_LINES]):
            prefix = "  ⎿ " if i == 0 else "    "
            self.console.print(Text(prefix + line, style=status), soft_wrap=True)
        if len(lines) > PREVIEW_LINES:
            self.console.print(f"    [dim]… {len(lines) - PREVIEW_LINES} more lines[/dim]")


def _call_line(event: ToolCallRequested) -> str:
    try:
        arguments = event.call.parsed_arguments()
    except ValueError:
        return f"{event.call.name}({event.call.arguments[:80]})"
    shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
    return f"{event.call.name}({shown})"


def _short(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    first = text.splitlines()[0] if text else text
    return first if len(first) <= limit and first == text else first[:limit] + "…"


def not_verified(event: VerificationFinished) -> str | None:
    """Why a verification left the change unchecked (checks it could not run), or None."""
    if event.ok:
        return None
    if any(check.status == "skipped" for check in event.checks):
        return event.report.splitlines()[0] if event.report else "not verified"
    broken = [check.name for check in event.checks if check.status == "error"]
    if not broken:
        return None
    names = ", ".join(broken)
    return (
        f"not verified: {names} could not run here, or printed nothing that could be read as "
        "results (the verification report says which)"
    )


def unverified_in(records: Sequence[Record]) -> str | None:
    """Why the change of a run (these records) was not verified, if one of its checks said so."""
    checks = (r.event for r in records if isinstance(r.event, VerificationFinished))
    return next((why for why in map(not_verified, checks) if why), None)


def handoff_lines(event: ChangesReady | ChangesApplied, session_id: str) -> list[str]:
    """What a person reads about a session's change: ready for review, or what became of it."""
    if isinstance(event, ChangesReady):
        lines = [f"change ready: {event.summary}"]
        lines += [f"  {f.status} {f.path}" for f in event.files[:20]]
        if len(event.files) > 20:
            lines.append(f"  … {len(event.files) - 20} more")
        lines += [f"  ⚠ {flag}" for flag in event.flagged]
        return lines
    if event.outcome == "applied":
        merged = f" ({len(event.merged)} merged with your edits)" if event.merged else ""
        return [
            f"applied to the checkout: {len(event.written)} written, "
            f"{len(event.deleted)} deleted{merged}"
        ]
    if event.outcome == "discarded":
        return ["change discarded"]
    what = "conflicts with your edits" if event.outcome == "conflicts" else "was refused"
    lines = [f"the change {what}; nothing was applied:"]
    lines += [f"  {problem}" for problem in event.problems]
    lines.append(f"  see it with: kestrel diff {session_id}")
    return lines


def pending_hint(session_id: str) -> str:
    """How to review and apply a change left in a session's overlay."""
    return (
        f"the change is in the session's overlay, not in your checkout: review it with "
        f"`kestrel diff {session_id}`, apply it with `kestrel apply {session_id}`, or drop it "
        f"with `kestrel discard {session_id}`"
    )


def footer(finished: SessionFinished, session_id: str) -> str:
    """One line: why the session stopped and what it spent (and the day, with a daily budget)."""
    t: Totals = finished.totals
    share = t.cache_read_share
    cached = f" ({_k(t.cache_read_tokens)} cached, {share:.0%} of input)" if share else ""
    detail = f": {finished.detail}" if finished.detail else ""
    day = ""
    if finished.day_cost_usd is not None:
        tokens = f", {_k(finished.day_tokens)} tokens" if finished.day_tokens is not None else ""
        day = f" · today ${finished.day_cost_usd:.4f}{tokens} in all sessions"
    return (
        f"── {finished.reason}{detail} · {t.turns} turns · {t.tool_calls} tool calls · "
        f"{tokens_text(t, spelled=True)}{cached} · {cost_text(t)} · {t.wall_s:.1f} s{day} · "
        f"session {session_id}"
    )


def add_usage(totals: Totals, completed: ModelCompleted) -> Totals:
    """`totals` with one more model call's tokens and cost."""
    u = completed.usage
    return replace(
        totals,
        turns=totals.turns + 1,
        input_tokens=totals.input_tokens + u.input_tokens,
        output_tokens=totals.output_tokens + u.output_tokens,
        cache_write_tokens=totals.cache_write_tokens + u.cache_write_tokens,
        cache_read_tokens=totals.cache_read_tokens + u.cache_read_tokens,
        cost_usd=totals.cost_usd + u.cost_usd,
        tokens_estimated=totals.tokens_estimated or not u.tokens_reported,
        cost_known=totals.cost_known and u.priced,
    )


def spend_line(spent: Totals, *, whole_session: bool = True) -> str:
    """The running spend, shown after each model call: tokens, dollars, cache-read share (not
    when the tokens are estimated: a server that reports no usage reports no cache reads)."""
    share = None if spent.tokens_estimated else spent.cache_read_share
    cached = f" · {share:.0%} cache reads" if share is not None else ""
    scope = "spent" if whole_session else "spent this run"
    return f"  ⋯ {scope} {tokens_text(spent)} · {cost_text(spent)}{cached}"
