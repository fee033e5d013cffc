"""The pieces of the conversation: the person's messages, the model's markdown as it streams,
tool calls as collapsible blocks, diffs, verification reports and notices."""

from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static

from kestrel.protocol.events import ToolFinished, VerificationFinished, VerifyFailure
from kestrel.protocol.messages import ToolCall

OUTPUT_LINES = 40
"""How many of a tool's last output lines a block keeps on screen."""
DIFF_LINES = 200


class UserLine(Static):
    """A message from the person."""

    DEFAULT_CSS = """
    UserLine { margin: 1 0 0 0; color: $accent; text-style: bold; }
    """

    def __init__(self, text: str, *, queued: bool = False) -> None:
        super().__init__(Text(("… " if queued else "> ") + text))


class Notice(Static):
    """A line Kestrel says about the session: dim, a warning, or an error."""

    DEFAULT_CSS = """
    Notice { color: $text-muted; }
    Notice.warning { color: $warning; }
    Notice.error { color: $error; }
    Notice.good { color: $success; }
    """

    def __init__(self, text: str, level: str = "") -> None:
        super().__init__(Text(text), classes=level)


class AssistantText(Markdown):
    """The model's reply, appended to as it streams: only this widget redraws, and only its
    last block is parsed again."""

    DEFAULT_CSS = """
    AssistantText { margin: 1 0 0 0; padding: 0; background: transparent; }
    """

    def __init__(self) -> None:
        super().__init__("")

    async def add(self, fragment: str) -> None:
        """Append a piece of the reply."""
        await self.append(fragment)


def call_title(call: ToolCall) -> str:
    """`name(key=value, ...)`, each value cut to one short line."""
    try:
        arguments = call.parsed_arguments()
    except ValueError:
        return f"{call.name}({call.arguments[:80]})"
    shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
    return f"{call.name}({shown})"


def _command_title(call: ToolCall) -> str:
    """`! command`, for a command the person ran."""
    try:
        command = call.parsed_arguments().get("command")
    except ValueError:
        command = None
    if not isinstance(command, str):
        return call_title(call)
    lines = command.strip().splitlines() or [""]
    return f"! {lines[0]}" + (" …" if len(lines) > 1 else "")


def _short(value: object, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    first = text.splitlines()[0] if text else text
    shown = first if len(first) <= limit and first == text else first[:limit] + "…"
    return repr(shown) if isinstance(value, str) else shown


def diff_text(diff: str, limit: int = DIFF_LINES) -> Text:
    """A unified diff coloured: additions green, removals red, the rest dim."""
    out = Text()
    lines = diff.splitlines()
    for line in lines[:limit]:
        if line.startswith("+") and not line.startswith("+++"):
            style = "green"
        elif line.startswith("-") and not line.startswith("---"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = "dim"
        out.append(line + "\n", style=style)
    if len(lines) > limit:
        out.append(f"… {len(lines) - limit} more lines\n", style="dim")
    return out


class ToolBlock(Collapsible):
    """One tool call: its title line, then its output, diffs and result inside."""

    DEFAULT_CSS = """
    ToolBlock { margin: 0; padding: 0; border-top: none; background: transparent; }
    ToolBlock:ansi { border-top: none; background: transparent; }
    ToolBlock > Contents { padding: 0 0 0 2; }
    ToolBlock.failed CollapsibleTitle { color: $error; }
    ToolBlock.running CollapsibleTitle { color: $accent; }
    """

    def __init__(self, call: ToolCall, *, by_person: bool = False) -> None:
        self.title_text = _command_title(call) if by_person else call_title(call)
        self.by_person = by_person
        """A command the person ran (`!command`): its output stays open."""
        self._output = Static("", classes="output")
        self._lines: list[str] = []
        super().__init__(self._output, title=f"● {self.title_text}", collapsed=False)
        self.add_class("running")

    def add_output(self, text: str) -> None:
        """More of the tool's output as it runs; only its last lines stay."""
        self._lines.extend(text.splitlines())
        del self._lines[:-OUTPUT_LINES]
        self._output.update(Text("\n".join(self._lines), style="dim"))

    def finish(self, event: ToolFinished, *, timings: bool) -> None:
        """The call ended: mark the title, show the result when no output streamed."""
        self.remove_class("running")
        mark = "✗" if event.is_error else "✓"
        took = f" · {event.duration_ms / 1000:.1f} s" if timings else ""
        code = f" · exit {event.exit_code}" if event.exit_code not in (None, 0) else ""
        self.title = f"{mark} {self.title_text}{code}{took}"
        if not self._lines:
            lines = event.content.splitlines()
            if self.has_class("edits"):
                lines = lines[:1]  # The diff is shown already, from the file's change.
            shown = lines[:OUTPUT_LINES]
            more = (
                f"\n… {len(lines) - OUTPUT_LINES} more lines" if len(lines) > OUTPUT_LINES else ""
            )
            self._output.update(Text("\n".join(shown) + more, style="dim"))
        if event.is_error:
            self.add_class("failed")
        self.collapsed = not (event.is_error or self.has_class("edits") or self.by_person)


def failure_line(failure: VerifyFailure) -> str:
    """`kind tool file:line test: message`, each part only when known."""
    where = f"{failure.file}:{failure.line}" if failure.file and failure.line else failure.file
    parts = [failure.kind, failure.tool, where or "", failure.test or ""]
    head = " ".join(p for p in parts if p)
    message = failure.message.splitlines()[0] if failure.message else ""
    return f"{head}: {message}" if message else head


class VerificationBlock(Vertical):
    """A verification's outcome: each check, then each structured failure."""

    DEFAULT_CSS = """
    VerificationBlock { height: auto; margin: 0 0 0 2; }
    VerificationBlock .passed { color: $success; }
    VerificationBlock .failed { color: $error; }
    VerificationBlock .failure { color: $text-muted; padding: 0 0 0 2; }
    """

    def __init__(self, event: VerificationFinished) -> None:
        super().__init__()
        self.event = event

    def compose(self) -> ComposeResult:
        """The checks line, then one line per failure."""
        event = self.event
        mark, level = ("✓ verified", "passed") if event.ok else ("✗ verification failed", "failed")
        checks = ", ".join(f"{c.name} {c.status}" for c in event.checks)
        yield Static(Text(mark + (f": {checks}" if checks else "")), classes=level)
        for failure in event.failures[:20]:
            yield Static(Text(failure_line(failure)), classes="failure")
        if not event.failures and not event.ok and event.report:
            yield Static(Text(event.report.splitlines()[0]), classes="failure")


class SubagentBlock(Collapsible):
    """A subagent's session, nested and indented inside its parent's conversation."""

    DEFAULT_CSS = """
    SubagentBlock { margin: 0 0 0 2; padding: 0; border-top: none; border-left: vkey $accent; }
    SubagentBlock:ansi { border-top: none; background: transparent; }
    """
