"""The prompt: multi-line, never blocked by the agent, with a history and file completion.

Enter sends; Ctrl+J (or Shift+Enter, where the terminal reports it) starts a new line; Up on the
first line and Down on the last walk through what was sent before; Tab after `@` completes a
file name of the repository.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = ("ctrl+j", "shift+enter")
_MENTION = re.compile(r"@([\w./-]*)$")


def complete_mention(line: str, files: Sequence[str]) -> str | None:
    """`line` with its trailing `@partial` completed to the longest name every match shares;
    None when nothing matches or nothing would change."""
    found = _MENTION.search(line)
    if found is None:
        return None
    partial = found.group(1)
    matches = [f for f in files if f.startswith(partial)] or [
        f for f in files if f.rsplit("/", 1)[-1].startswith(partial)
    ]
    if not matches:
        return None
    common = matches[0]
    for name in matches[1:]:
        while not name.startswith(common):
            common = common[:-1]
    if len(matches) == 1:
        common += " "
    if common.strip() == partial:
        return None
    return line[: found.start(1)] + common


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

    def __init__(self, files: Sequence[str] = (), **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)  # type: ignore[arg-type]
        self.sent = History([])
        self.files = files

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._send()
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key in ("up", "down") and self._walk(event.key):
            event.stop()
            event.prevent_default()
            return
        if event.key == "tab" and self._complete():
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

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

    def _complete(self) -> bool:
        row, column = self.cursor_location
        line = self.document.get_line(row)[:column]
        completed = complete_mention(line, self.files)
        if completed is None:
            return False
        self.replace(completed, (row, 0), (row, column))
        return True
