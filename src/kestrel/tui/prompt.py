"""The prompt: multi-line, never blocked by the agent, with a history and `@` completion.

Enter sends; Ctrl+J (or Shift+Enter, where the terminal reports it) starts a new line; Up on the
first line and Down on the last walk through what was sent before; Tab after `@` completes a
file name or a definition of the repository: as far as it is certain, then, Tab after Tab,
through each candidate (Shift+Tab goes back), listed above the prompt; Enter takes the one
shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Static, TextArea

from kestrel.tui.mentions import MENTION, Candidate, SymbolName, candidates, complete_mention

NEWLINE_KEYS = ("ctrl+j", "shift+enter")
HINT_LINES = 6
"""Candidates the completion list shows at once."""


@dataclass(slots=True)
class History:
    """What was sent, oldest first, and where Up/Down stand in it."""

    entries: list[str]
    at: int = 0
    draft: str = ""

    def add(self, text: str) -> None:
        """Remember a sent message; the walk starts again from the newest."""
        if text and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
        self.at = len(self.entries)
        self.draft = ""

    def back(self, current: str) -> str | None:
        """The message before the one shown; None at the oldest."""
        if self.at == 0:
            return None
        if self.at == len(self.entries):
            self.draft = current
        self.at -= 1
        return self.entries[self.at]

    def forward(self) -> str | None:
        """The message after the one shown (the draft after the newest); None past it."""
        if self.at >= len(self.entries):
            return None
        self.at += 1
        return self.entries[self.at] if self.at < len(self.entries) else self.draft


@dataclass(slots=True)
class Cycle:
    """Tab after Tab through the candidates of one `@partial`: where it stands, what is shown."""

    row: int
    start: int
    """The column after the `@`."""
    options: list[Candidate]
    at: int
    shown: str


class CompletionHint(Static):
    """The candidates of an `@` completion, above the prompt; hidden when there are none."""

    DEFAULT_CSS = """
    CompletionHint { height: auto; padding: 0 2; background: $boost; display: none; }
    """

    def show(self, labels: Sequence[str], at: int | None) -> None:
        """List `labels` (the one at `at` marked), or hide when there are none."""
        if not labels:
            self.display = False
            return
        first = 0 if at is None else max(0, min(at - HINT_LINES // 2, len(labels) - HINT_LINES))
        text = Text()
        for index in range(first, min(first + HINT_LINES, len(labels))):
            mark = "> " if index == at else "  "
            text.append(f"{mark}{labels[index]}\n", style="bold" if index == at else "")
        text.append(f"  {len(labels)} found · Tab: next · Shift+Tab: back · Enter: take it")
        self.update(text)
        self.display = True


class PromptInput(TextArea):
    """Where the person writes; Enter sends, whatever the agent is doing."""

    DEFAULT_CSS = """
    PromptInput { height: auto; min-height: 3; max-height: 12; border: round $accent 60%; }
    PromptInput:focus { border: round $accent; }
    """

    class Submitted(Message):
        """The person sent `text`."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Completions(Message):
        """The `@` candidates to list (none: hide the list), and the one shown in the prompt."""

        def __init__(self, labels: Sequence[str], at: int | None) -> None:
            super().__init__()
            self.labels, self.at = list(labels), at

    def __init__(self, files: Sequence[str] = (), **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)  # type: ignore[arg-type]
        self.sent = History([])
        self.files = files
        self.symbols: Sequence[SymbolName] = ()
        self._cycle: Cycle | None = None
        self._listing = False

    async def _on_key(self, event: events.Key) -> None:
        if self._listing and event.key not in ("tab", "shift+tab"):
            if event.key == "enter" and self._cycle is not None:
                event.stop()
                event.prevent_default()
                self._end_completion()
                self.insert(" ")  # Enter takes the candidate shown; a second Enter sends.
                return
            self._end_completion()
        if self._handled(event.key):
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

    def _handled(self, key: str) -> bool:
        if key == "enter":
            self._send()
            return True
        if key in NEWLINE_KEYS:
            self.insert("\n")
            return True
        if key in ("up", "down"):
            return self._walk(key)
        if key in ("tab", "shift+tab"):
            return self._complete(backwards=key == "shift+tab")
        return False

    def _send(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.sent.add(text)
        self.clear()
        self.post_message(self.Submitted(text))

    def _walk(self, key: str) -> bool:
        row, _ = self.cursor_location
        if key == "up" and row == 0:
            shown = self.sent.back(self.text)
        elif key == "down" and row == self.document.line_count - 1:
            shown = self.sent.forward()
        else:
            return False
        if shown is None:
            return False
        self.load_text(shown)
        self.move_cursor(self.document.end)
        return True

    def _complete(self, *, backwards: bool = False) -> bool:
        """Tab: the next candidate while cycling, else as far as is certain, else cycle."""
        if self._cycling():
            assert self._cycle is not None
            step = -1 if backwards else 1
            self._cycle.at = (self._cycle.at + step) % len(self._cycle.options)
            self._put(self._cycle)
            return True
        if backwards:
            return False
        row, column = self.cursor_location
        line = self.document.get_line(row)[:column]
        found = MENTION.search(line)
        if found is None:
            return False
        options = candidates(found.group(1), self.files, self.symbols)
        completed = complete_mention(line, self.files, self.symbols)
        if completed is not None:
            self.replace(completed, (row, 0), (row, column))
            self._list([c.label for c in options] if len(options) > 1 else [], None)
            return True
        if not options:
            return False
        self._cycle = Cycle(row, found.start(1), options, 0, found.group(1))
        self._put(self._cycle)
        return True

    def _cycling(self) -> bool:
        cycle = self._cycle
        if cycle is None:
            return False
        row, column = self.cursor_location
        end = cycle.start + len(cycle.shown)
        line = self.document.get_line(row) if row < self.document.line_count else ""
        return row == cycle.row and column == end and line[cycle.start : end] == cycle.shown

    def _put(self, cycle: Cycle) -> None:
        """Show the candidate the cycle stands at in place of the one shown before."""
        text = cycle.options[cycle.at].text
        end = cycle.start + len(cycle.shown)
        self.replace(text, (cycle.row, cycle.start), (cycle.row, end))
        cycle.shown = text
        self._list([c.label for c in cycle.options], cycle.at)

    def _list(self, labels: list[str], at: int | None) -> None:
        self._listing = bool(labels)
        self.post_message(self.Completions(labels, at))

    def _end_completion(self) -> None:
        self._cycle = None
        self._list([], None)
