"""A session's events as the protocol's `session/update`s: the model's text, tool calls with
their kind, status, files and diffs, the task list as a plan, and what became of the change.

Pure: records in, updates out. The same renderer streams a live run and replays a loaded
session's history (which also shows the person's own messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from acp.helpers import (
    SessionUpdate,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    PlanEntryStatus,
    ToolCallLocation,
)

from kestrel.acp.tool_view import diff_contents, view_of
from kestrel.protocol.events import (
    ChangesApplied,
    ChangesReady,
    ErrorOccurred,
    Event,
    FileChanged,
    ModelRequestStarted,
    PlanProposed,
    Record,
    SessionFinished,
    TodoStatus,
    TodoUpdated,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
    UserMessage,
    VerificationFinished,
)
from kestrel.protocol.events import ModelTextDelta as TextDelta

RESULT_CHARS = 4_000
"""At most this much of a tool's result is shown in the editor (the log keeps it whole)."""
_PLAN_STATUS: dict[TodoStatus, PlanEntryStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "done": "completed",
}
ToolContent = ContentToolCallContent | FileEditToolCallContent


@dataclass(slots=True)
class Renderer:
    """Turns one session's records into updates, remembering each tool call's diffs."""

    session_id: str
    cwd: Path
    replaying: bool = False
    """Replaying a loaded session: the person's messages are shown too."""
    _diffs: dict[str, list[FileEditToolCallContent]] = field(default_factory=dict)
    _spoke: bool = False
    """Whether the model's text was shown already: a new turn's text then starts a paragraph."""
    _new_turn: bool = False
    _ready: str = ""
    """The checkpoint of the change last shown as ready (an apply logs it again)."""

    def render(self, record: Record) -> list[SessionUpdate]:
        """The updates one record makes (often none)."""
        event = record.event
        match event:
            case TextDelta():
                return self._text(event.text)
            case ModelRequestStarted():
                self._new_turn = True
                return []
            case UserMessage():
                return [update_user_message_text(event.text)] if self.replaying else []
            case ToolCallRequested():
                call = event.call
                view = view_of(call.name, call.arguments, self.cwd)
                start = start_tool_call(
                    call.id,
                    view.title,
                    kind=view.kind,
                    status="pending",
                    locations=view.locations or None,
                    raw_input=view.raw_input,
                )
                return [start]
            case ToolStarted():
                return [update_tool_call(event.call_id, status="in_progress")]
            case FileChanged():
                return self._file_changed(event)
            case ToolFinished():
                return [self._finished(event)]
            case TodoUpdated() | PlanProposed():
                return [update_plan(plan_entries(event))]
            case VerificationFinished():
                return self._verified(event, record.seq)
            case _:
                return self._said(event)

    def _text(self, text: str) -> list[SessionUpdate]:
        if not text:
            return []
        if self._new_turn and self._spoke:
            text = "\n\n" + text
        self._spoke, self._new_turn = True, False
        return [update_agent_message_text(text)]

    def _file_changed(self, event: FileChanged) -> list[SessionUpdate]:
        diffs = self._diffs.setdefault(event.call_id, [])
        diffs += diff_contents(
            event.path,
            event.diff,
            self.cwd,
            new_file=event.before_hash is None,
            deleted=event.after_hash is None,
        )
        content: list[ToolContent] = list(diffs)
        return [update_tool_call(event.call_id, content=content)] if diffs else []

    def _finished(self, event: ToolFinished) -> SessionUpdate:
        failed = event.is_error or event.interrupted
        content: list[ToolContent] = list(self._diffs.pop(event.call_id, []))
        if not content or failed:
            content.append(tool_content(text_block(_cut(event.content))))
        return update_tool_call(
            event.call_id, status="failed" if failed else "completed", content=content
        )

    def _verified(self, event: VerificationFinished, seq: int) -> list[SessionUpdate]:
        call_id = f"verification-{self.session_id}-{seq}"
        locations = [ToolCallLocation(path=str(self.cwd / path)) for path in event.paths[:20]]
        return [
            start_tool_call(
                call_id,
                "Verify the change" + (f" ({', '.join(event.paths[:3])})" if event.paths else ""),
                kind="execute",
                status="completed" if event.ok else "failed",
                content=[tool_content(text_block(_cut(event.report or "verified")))],
                locations=locations or None,
            )
        ]

    def _said(self, event: Event) -> list[SessionUpdate]:
        """What a person should read about the run itself: its end, errors, the change."""
        if isinstance(event, ChangesReady):
            if event.checkpoint_id == self._ready:
                return []
            self._ready = event.checkpoint_id
        text = said_about(event, self.session_id)
        return [update_agent_message_text(text)] if text else []


def said_about(event: Event, session_id: str) -> str:
    """A short paragraph on how the run stopped or what became of its change; empty when
    there is nothing to say."""
    match event:
        case SessionFinished(reason="done" | "cancelled"):
            return ""
        case SessionFinished():
            detail = f": {event.detail}" if event.detail else ""
            return f"\n\nKestrel stopped ({event.reason}{detail}).\n"
        case ErrorOccurred(recoverable=False):
            return f"\n\nError ({event.error_kind}): {event.message}\n"
        case ChangesReady():
            files = "".join(f"\n- {f.status} {f.path}" for f in event.files[:20])
            more = f"\n- … {len(event.files) - 20} more" if len(event.files) > 20 else ""
            return f"\n\nChange ready: {event.summary}{files}{more}\n"
        case ChangesApplied(outcome="applied"):
            merged = f", {len(event.merged)} merged with your edits" if event.merged else ""
            return (
                f"\n\nApplied to your checkout: {len(event.written)} written, "
                f"{len(event.deleted)} deleted{merged}.\n"
            )
        case ChangesApplied(outcome="discarded"):
            return "\n\nThe change was discarded; your checkout was not touched.\n"
        case ChangesApplied():
            problems = "".join(f"\n- {p}" for p in event.problems[:20])
            return f"\n\nThe change was not applied ({event.outcome}):{problems}\n"
        case _:
            return ""


def plan_entries(event: TodoUpdated | PlanProposed) -> list[PlanEntry]:
    """The task list, or a proposed plan's steps (all pending), as plan entries."""
    if isinstance(event, TodoUpdated):
        return [
            PlanEntry(content=item.text, priority="medium", status=_PLAN_STATUS[item.status])
            for item in event.items
        ]
    return [
        PlanEntry(content=step.title, priority="medium", status="pending") for step in event.steps
    ]


def _cut(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return text[:RESULT_CHARS] + f"\n[… {len(text) - RESULT_CHARS} more characters in the log]"
