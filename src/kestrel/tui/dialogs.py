"""Modal dialogs: a permission question, a plan to decide, a change to review, pickers and
read-only text. Each returns the person's answer; the view writes it through the service."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ApprovalRequested, ApprovalScope, ChangesReady, PlanProposed
from kestrel.service.decisions import plan_as_json
from kestrel.tools.plan import plan_text
from kestrel.tui.blocks import diff_text
from kestrel.tui.review import ChangeAnswer, PlanAnswer, parse_edited

DIALOG_CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical {
    width: 90%; max-width: 110; height: auto; max-height: 90%;
    border: round $accent; padding: 0 1; background: $surface;
}
ModalScreen .title { text-style: bold; color: $accent; }
ModalScreen .reason { color: $warning; }
ModalScreen .subject { background: $boost; padding: 0 1; margin: 1 0; }
ModalScreen .problem { color: $error; }
ModalScreen VerticalScroll { height: auto; max-height: 24; }
ModalScreen Horizontal { height: auto; margin: 1 0 0 0; }
ModalScreen Button { margin: 0 1 0 0; min-width: 10; }
ModalScreen TextArea { height: 16; }
ModalScreen OptionList { height: auto; max-height: 20; }
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswer:
    """Allow (once or for the session) or deny, with the person's words."""

    allow: bool
    scope: ApprovalScope = "once"
    message: str = ""


def subject_of(question: ApprovalRequested) -> str:
    """The exact thing asked about: the command, the edit, or the call's arguments."""
    try:
        arguments = json.loads(question.arguments)
    except json.JSONDecodeError:
        return question.arguments
    if not isinstance(arguments, dict):
        return question.arguments
    if isinstance(arguments.get("command"), str):
        return f"$ {arguments['command']}"
    path = arguments.get("path")
    if isinstance(path, str) and "old_str" in arguments:
        old, new = str(arguments.get("old_str", "")), str(arguments.get("new_str", ""))
        lines = [f"--- {path}", f"+++ {path}"]
        lines += [f"-{line}" for line in old.splitlines()] + [
            f"+{line}" for line in new.splitlines()
        ]
        return "\n".join(lines)
    if isinstance(path, str) and isinstance(arguments.get("content"), str):
        body = arguments["content"].splitlines()
        return "\n".join([f"write {path}:", *(f"+{line}" for line in body[:40])])
    return json.dumps(arguments, indent=2, ensure_ascii=False)


class ApprovalScreen(ModalScreen[ApprovalAnswer]):
    """May this call run? Allow once, always for this session, or deny with a message."""

    DEFAULT_CSS = DIALOG_CSS
    AUTO_FOCUS = "#once"
    BINDINGS = [
        Binding("y", "answer('once')", "allow once"),
        Binding("a", "answer('session')", "always"),
        Binding("n", "answer('deny')", "deny"),
        Binding("escape", "answer('deny')", "deny", show=False),
    ]

    def __init__(self, question: ApprovalRequested) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        """The question, what exactly would run, why Kestrel asks, and the answers."""
        q = self.question
        subject = subject_of(q)
        with Vertical():
            yield Static(Text(f"Allow {q.name} ({q.kind})?"), classes="title")
            if subject.startswith(("---", "write ")):
                yield Static(diff_text(subject), classes="subject")
            else:
                yield Static(Text(subject), classes="subject")
            yield Static(Text(f"Why asked: {q.reason}"), classes="reason")
            yield Input(placeholder="a message for the model (optional; said with a denial)")
            with Horizontal():
                yield Button("Allow once (y)", id="once", variant="success")
                if q.repeatable:
                    yield Button("Always this session (a)", id="session", variant="primary")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """An answer button."""
        self.action_answer(event.button.id or "deny")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the message field denies with that message."""
        self.action_answer("deny")

    def action_answer(self, choice: str) -> None:
        """Close with the answer."""
        if choice == "session" and not self.question.repeatable:
            choice = "once"
        message = self.query_one(Input).value.strip()
        if choice == "deny":
            self.dismiss(ApprovalAnswer(allow=False, message=message))
        else:
            scope: ApprovalScope = "session" if choice == "session" else "once"
            self.dismiss(ApprovalAnswer(allow=True, scope=scope, message=message))


class PlanScreen(ModalScreen[PlanAnswer | None]):
    """Approve the proposed plan, edit it first (as JSON), or reject it with a reason."""

    DEFAULT_CSS = DIALOG_CSS
    AUTO_FOCUS = "#approve"
    BINDINGS = [Binding("escape", "later", "decide later")]

    def __init__(self, plan: PlanProposed) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        """The plan, an editor kept hidden until Edit, a reason field and the answers."""
        with Vertical():
            yield Static(Text("A plan waits for your decision"), classes="title")
            with VerticalScroll():
                yield Static(Text(plan_text(self.plan.summary, self.plan.steps)), classes="subject")
            editor = TextArea(plan_as_json(self.plan), language=None, id="editor")
            editor.display = False
            yield editor
            yield Static("", classes="problem", id="problem")
            yield Input(placeholder="why (for a rejection)", id="reason")
            with Horizontal():
                yield Button("Approve", id="approve", variant="success")
                edited = Button("Approve edited", id="approve-edited", variant="success")
                edited.display = False
                yield edited
                yield Button("Edit", id="edit", variant="primary")
                yield Button("Reject", id="reject", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Approve (the edit, when editing), open the editor, or reject."""
        editor = self.query_one("#editor", TextArea)
        if event.button.id == "edit":
            editor.display = True
            for shown in ("#approve", "#edit"):
                self.query_one(shown).display = False
            self.query_one("#approve-edited").display = True
            editor.focus()
        elif event.button.id == "approve":
            self.dismiss(PlanAnswer(approve=True))
        elif event.button.id == "approve-edited":
            try:
                parse_edited(editor.text)
            except ConfigError as exc:
                self.query_one("#problem", Static).update(Text(str(exc)))
                return
            self.dismiss(PlanAnswer(approve=True, edited=editor.text))
        elif event.button.id == "reject":
            reason = self.query_one("#reason", Input).value.strip()
            self.dismiss(PlanAnswer(approve=False, reason=reason or "rejected without a reason"))

    def action_later(self) -> None:
        """Leave the plan waiting."""
        self.dismiss(None)


class ChangeScreen(ModalScreen[ChangeAnswer]):
    """Review the session's change: apply it, look later, or reject it with feedback."""

    DEFAULT_CSS = DIALOG_CSS
    AUTO_FOCUS = "#apply"
    BINDINGS = [Binding("escape", "later", "later")]

    def __init__(self, ready: ChangesReady, diff: str) -> None:
        super().__init__()
        self.ready, self.diff = ready, diff

    def compose(self) -> ComposeResult:
        """The files, the diff, a feedback field and the answers."""
        files = [f"{f.status} {f.path}" for f in self.ready.files]
        flags = [f"⚠ {flag}" for flag in self.ready.flagged]
        with Vertical():
            yield Static(Text(f"Change ready: {self.ready.summary}"), classes="title")
            yield Static(Text("\n".join([*files, *flags])))
            with VerticalScroll():
                yield Static(diff_text(self.diff), classes="subject")
            yield Input(placeholder="what to do differently (for a rejection)", id="feedback")
            with Horizontal():
                yield Button("Apply", id="apply", variant="success")
                yield Button("Later", id="later")
                yield Button("Reject", id="reject", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Close with the answer."""
        feedback = self.query_one("#feedback", Input).value.strip()
        if event.button.id == "apply":
            self.dismiss(ChangeAnswer(action="apply"))
        elif event.button.id == "reject":
            self.dismiss(ChangeAnswer(action="reject", feedback=feedback))
        else:
            self.action_later()

    def action_later(self) -> None:
        """Leave the change waiting in the overlay."""
        self.dismiss(ChangeAnswer(action="later"))


class PickerScreen(ModalScreen[str | None]):
    """Pick one of a list (a checkpoint, a session); Esc picks none."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, choices: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        """The title and the list."""
        with Vertical():
            yield Static(Text(self.title_text), classes="title")
            yield OptionList(*(Option(Text(label), id=key) for key, label in self.choices))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on an entry picks it."""
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Pick nothing."""
        self.dismiss(None)


class TextScreen(ModalScreen[None]):
    """Read-only text (help, the diff, the cost); Esc or q closes it."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [Binding("escape", "close", "close"), Binding("q", "close", "close")]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        """The title and the scrollable text."""
        with Vertical():
            yield Static(Text(self.title_text), classes="title")
            with VerticalScroll():
                yield Static(self.body)

    def action_close(self) -> None:
        """Close."""
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """Do something (shown in full) or leave things as they are; Esc leaves them."""

    DEFAULT_CSS = DIALOG_CSS
    AUTO_FOCUS = "#no"
    BINDINGS = [Binding("escape", "answer(False)", "leave it")]

    def __init__(self, title: str, body: Text, yes: str, no: str) -> None:
        super().__init__()
        self.title_text, self.body, self.labels = title, body, (yes, no)

    def compose(self) -> ComposeResult:
        """The title, the scrollable text and the two answers."""
        with Vertical():
            yield Static(Text(self.title_text), classes="title")
            with VerticalScroll():
                yield Static(self.body, classes="subject")
            with Horizontal():
                yield Button(self.labels[0], id="yes", variant="success")
                yield Button(self.labels[1], id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Close with the answer."""
        self.action_answer(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        """Close with `yes`."""
        self.dismiss(yes)
