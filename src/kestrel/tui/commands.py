"""Slash commands: the built-in ones, and the person's own from markdown files.

A custom command is a markdown file in `.kestrel/commands/` of the project or `commands/` of
the user's settings folder; its name is the file's stem, its body the prompt, with `$ARGUMENTS`
replaced by what follows the command. A project's command wins over the user's of the same
name; a built-in command wins over both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BUILTIN: Mapping[str, str] = {
    "help": "this list",
    "model": "/model PROVIDER:MODEL: use another model from the next message on",
    "mode": "/mode default|accept-edits|plan|bypass: the permission mode from now on",
    "plan": "/plan [message]: plan first (read-only), then approve, edit or reject",
    "rewind": "restore the files of a checkpoint and continue from there",
    "diff": "the change waiting for review",
    "apply": "apply the waiting change to the checkout",
    "discard": "drop the waiting change",
    "cost": "what the session spent",
    "compact": "fold the conversation but its newest turn into a summary now",
    "memory": "/memory [list] | add [--user] TEXT | rm ID: what new sessions start with",
    "init": "write a starting AGENTS.md from the repository map (asks before changing one)",
    "sessions": "this project's sessions",
    "resume": "/resume [ID]: continue an earlier session",
    "clear": "clear the screen; the next message starts a new session",
    "quit": "leave (a running step is stopped first)",
}


@dataclass(frozen=True, slots=True)
class Slash:
    """A line that names a command: the name without its slash, and the rest."""

    name: str
    arguments: str


def parse_slash(text: str) -> Slash | None:
    """The command a line names (`/name rest`), or None for an ordinary message."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    if not head or "/" in head:
        return None  # A path such as `/usr/bin` is a message, not a command.
    return Slash(name=head.lower(), arguments=rest.strip())


@dataclass(frozen=True, slots=True)
class CustomCommand:
    """A command from a markdown file."""

    name: str
    body: str
    source: Path

    def prompt(self, arguments: str) -> str:
        """The message it sends: its body with `$ARGUMENTS` replaced (appended when absent)."""
        if "$ARGUMENTS" in self.body:
            return self.body.replace("$ARGUMENTS", arguments)
        return f"{self.body.rstrip()}\n\n{arguments}" if arguments else self.body

    @property
    def summary(self) -> str:
        """The first line of its body, for /help."""
        first = next((line for line in self.body.splitlines() if line.strip()), "")
        return first.strip().lstrip("#").strip()[:70]


def user_commands_dir(env: Mapping[str, str], home: Path) -> Path:
    """The user's command folder: `commands/` in Kestrel's settings folder."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config"
    return base / "kestrel" / "commands"


def load_custom(cwd: Path, env: Mapping[str, str], home: Path) -> dict[str, CustomCommand]:
    """Every custom command: the user's, then the project's over them; unreadable files are
    left out."""
    found: dict[str, CustomCommand] = {}
    for folder in (user_commands_dir(env, home), cwd / ".kestrel" / "commands"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            name = path.stem.lower()
            if name in BUILTIN or not name or " " in name:
                continue
            try:
                body = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found[name] = CustomCommand(name=name, body=body, source=path)
    return found


def help_text(custom: Mapping[str, CustomCommand]) -> str:
    """The help screen's text: keys, built-in commands, then the person's own."""
    lines = [
        "Keys: Enter sends · Ctrl+J or Shift+Enter: new line · ↑/↓: history · "
        "Esc: stop the running step · Ctrl+Q: quit",
        "Tab after @name: complete a file or a definition (again: the next candidate).",
        "!command: run it in the session's sandbox, through its rules (shown as a tool call).",
        "While the agent works, what you send waits and goes as the next message.",
        "",
        "Commands:",
        *(f"  /{name:<9} {what}" for name, what in BUILTIN.items()),
    ]
    if custom:
        lines += ["", "Your commands:"]
        lines += [f"  /{c.name:<9} {c.summary}" for c in custom.values()]
    return "\n".join(lines)
