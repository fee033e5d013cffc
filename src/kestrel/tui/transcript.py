"""A session's conversation as widgets, built record by record from its log.

Each record adds to the end or updates one block: a streamed piece of text is appended to the
reply being written, a tool's output to its own block. Nothing above is redrawn.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetNotice,
    BudgetWarning,
    CancelRequested,
    ChangesApplied,
    ChangesReady,
    ContextAdded,
    ContextCompacted,
    ErrorOccurred,
    Event,
    FileChanged,
    HookRan,
    InjectionFlagged,
    LoopDetected,
    LoopRecovered,
    ModelRetrying,
    ModelSwitched,
    ModelTextDelta,
    ModelToolCallDelta,
    PermissionDecided,
    PlanDecided,
    PlanProposed,
    PromptBlocked,
    Record,
    Rewound,
    SessionFinished,
    SessionResumed,
    SessionStarted,
    SubagentFinished,
    SubagentStarted,
    TodoUpdated,
    ToolCallRequested,
    ToolFinished,
    ToolOutputChunk,
    UserMessage,
    VerificationFinished,
)
from kestrel.service import shell
from kestrel.tools.plan import plan_text
from kestrel.tui.blocks import (
    AssistantText,
    Notice,
    SubagentBlock,
    ToolBlock,
    UserLine,
    VerificationBlock,
    diff_text,
)
from kestrel.tui.status import cost, count, model_label

USER_LINES = 6
"""Lines of a long message shown (a plan decision's message is long)."""
MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}
_QUIET = (ModelToolCallDelta,)
"""Events that neither show anything nor end the reply being streamed."""


class Transcript(Vertical):
    """One session's conversation; a subagent's is nested inside its parent's."""

    DEFAULT_CSS = """
    Transcript { height: auto; }
    """

    def __init__(self, *, timings: bool = True) -> None:
        super().__init__()
        self.timings = timings
        self._text: AssistantText | None = None
        self._pending: list[str] = []
        self._blocks: dict[str, ToolBlock] = {}
        self._children: dict[str, Transcript] = {}
        self._subagents: dict[str, SubagentBlock] = {}

    async def render_record(self, record: Record) -> Transcript | None:
        """Show one record; returns the nested transcript a subagent's records go to. Streamed
        text waits for `flush` (or the next other record), so a batch is one append."""
        event = record.event
        if isinstance(event, _QUIET):
            return None
        if isinstance(event, ModelTextDelta):
            self._pending.append(event.text)
            return None
        await self.flush()
        self._text = None  # The reply is over; the next one starts a new block.
        if isinstance(event, SubagentStarted):
            return await self._subagent(event)
        await self._show_event(event)
        return None

    async def flush(self) -> None:
        """Show the streamed text that waits, appended to the reply being written."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        if self._text is None:
            self._text = AssistantText()
            await self.mount(self._text)
        await self._text.add(text)

    async def _add(self, widget: Widget, call_id: str | None = None) -> None:
        """Mount inside the call's block when it has one, else at the end."""
        block = self._blocks.get(call_id or "")
        if block is not None:
            await block.query_one("Contents").mount(widget)
        else:
            await self.mount(widget)

    async def _note(self, text: str, level: str = "", call_id: str | None = None) -> None:
        await self._add(Notice(text, level), call_id)

    async def _subagent(self, event: SubagentStarted) -> Transcript:
        child = Transcript(timings=self.timings)
        what = f": {event.description}" if event.description else ""
        block = SubagentBlock(child, title=f"↳ {event.agent}{what}", collapsed=False)
        self._children[event.call_id] = child
        self._subagents[event.call_id] = block
        await self._add(block, event.call_id)
        return child

    async def _show_event(self, event: Event) -> None:
        match event:
            case SessionStarted():
                await self._note(f"{model_label(event.model)} · mode {event.permission_mode}")
            case SessionResumed():
                await self._note("resumed")
            case UserMessage():
                lines = event.text.splitlines() or [""]
                more = (
                    f" … ({len(lines) - USER_LINES} more lines)" if len(lines) > USER_LINES else ""
                )
                await self.mount(UserLine("\n".join(lines[:USER_LINES]) + more))
            case ToolCallRequested():
                block = ToolBlock(event.call, by_person=shell.is_person_call(event.call.id))
                self._blocks[event.call.id] = block
                await self.mount(block)
            case ToolOutputChunk():
                if (running := self._blocks.get(event.call_id)) is not None:
                    running.add_output(event.text)
            case FileChanged():
                await self._file_changed(event)
            case ToolFinished():
                if (ended := self._blocks.get(event.call_id)) is not None:
                    ended.finish(event, timings=self.timings)
            case VerificationFinished():
                await self.mount(VerificationBlock(event))
            case SubagentFinished():
                await self._subagent_finished(event)
            case _:
                await self._render_asks(event)

    async def _file_changed(self, event: FileChanged) -> None:
        block = self._blocks.get(event.call_id)
        if block is not None:
            block.add_class("edits")
        await self._note(f"changed {event.path}", call_id=event.call_id)
        if event.diff:
            await self._add(Static(diff_text(event.diff), classes="diff"), event.call_id)

    async def _subagent_finished(self, event: SubagentFinished) -> None:
        block = self._subagents.get(event.call_id)
        if block is not None:
            block.title = f"{block.title} · {event.reason}"
            block.collapsed = event.reason == "done"

    async def _render_asks(self, event: Event) -> None:
        match event:
            case ApprovalRequested():
                await self._note(
                    f"? {event.reason}: waiting for your answer", "warning", event.call_id
                )
            case ApprovalDecided():
                verdict = "allowed" if event.allow else "denied"
                scope = " for this session" if event.scope == "session" else ""
                by = f" by {event.by}" if event.by else ""
                await self._note(f"{verdict}{scope}{by}", call_id=event.call_id)
            case PermissionDecided(decision="deny"):
                await self._note(f"✗ denied: {event.reason}", "error", event.call_id)
            case PermissionDecided(decided_by="rule" | "hook"):
                await self._note(f"✓ {event.reason}", call_id=event.call_id)
            case CancelRequested():
                await self._note(f"Stop asked by {event.by or 'another process'}.", "warning")
            case _:
                await self._render_work(event)

    async def _render_work(self, event: Event) -> None:
        match event:
            case TodoUpdated():
                origin = "from the approved plan" if event.source == "plan" else "updated"
                items = [f"  {MARKS[i.status]} {i.id}: {i.text}" for i in event.items]
                await self._note("\n".join([f"task list {origin}:", *items]), "good")
            case PlanProposed():
                body = plan_text(event.summary, event.steps)
                await self.mount(Static(Text(f"Plan proposed:\n{body}"), classes="plan"))
            case PlanDecided():
                edited = " (edited)" if event.edited else ""
                what = f"rejected: {event.reason}" if event.decision == "rejected" else "approved"
                await self._note(f"plan {what}{edited}", "good")
            case ChangesReady():
                files = [f"  {f.status} {f.path}" for f in event.files[:20]]
                flags = [f"  ⚠ {flag}" for flag in event.flagged]
                await self._note(
                    "\n".join([f"change ready: {event.summary}", *files, *flags]), "good"
                )
            case ChangesApplied():
                await self._note(
                    _applied_text(event), "good" if event.outcome == "applied" else "warning"
                )
            case Rewound():
                await self._note(
                    "rewound: files restored to a checkpoint; the conversation goes on from there",
                    "warning",
                )
            case SessionFinished():
                await self._finished(event)
            case _:
                await self._render_guards(event)

    async def _render_guards(self, event: Event) -> None:
        match event:
            case ModelRetrying():
                await self._note(f"retrying ({event.error_kind}: {event.message})", "warning")
            case ModelSwitched():
                await self._note(
                    f"{event.from_model} failed; going on with {event.to_model}", "warning"
                )
            case BudgetWarning():
                await self._note(
                    f"budget: {event.budget} at {event.used:g} of {event.limit:g}", "warning"
                )
            case BudgetNotice():
                await self._note(f"budget: {event.detail}", "warning")
            case LoopDetected():
                await self._note(f"loop {event.action}: {event.detail}", "warning")
            case LoopRecovered():
                await self._note(f"loop caught: {event.detail}; trying another way", "warning")
            case ErrorOccurred():
                await self._note(f"error: {event.message}", "error")
            case HookRan(outcome="error" | "timeout" | "crash" | "block"):
                await self._note(
                    f"hook {event.hook_event} {event.outcome}: {event.command}", "warning"
                )
            case InjectionFlagged():
                await self._note(f"⚠ {event.name} returned text aimed at the agent", "warning")
            case PromptBlocked():
                await self._note(f"prompt blocked by a hook: {event.reason}", "error")
            case ContextCompacted():
                await self._note(
                    f"context compacted: {event.dropped} messages folded into a summary "
                    f"(~{count(event.tokens_before)} → ~{count(event.tokens_after)} tokens)"
                )
            case ContextAdded(source=source) if source not in ("verification", shell.SOURCE):
                await self._note(
                    f"{source}: {event.text.splitlines()[0][:120] if event.text else ''}"
                )

    async def _finished(self, event: SessionFinished) -> None:
        t = event.totals
        detail = f": {event.detail}" if event.detail else ""
        line = (
            f"── {event.reason}{detail} · {t.turns} turns · {t.tool_calls} tool calls · "
            f"{count(t.tokens)} tokens · {cost(t)}"
        )
        await self._note(line, "" if event.reason in ("done", "plan") else "warning")


def _applied_text(event: ChangesApplied) -> str:
    if event.outcome == "applied":
        return (
            f"applied to the checkout: {len(event.written)} written, {len(event.deleted)} deleted"
        )
    if event.outcome == "discarded":
        return "change discarded"
    what = "conflicts with your edits" if event.outcome == "conflicts" else "was refused"
    return "\n".join(
        [f"the change {what}; nothing was applied:", *(f"  {p}" for p in event.problems)]
    )
