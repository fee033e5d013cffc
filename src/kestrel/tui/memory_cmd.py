"""`/memory`: list, add and remove the conventions every new session starts with.

The same store as `kestrel memory list|add|rm`: the repository's `.kestrel/memory.md` (scope
`project`, shared with the repository) and the user's `memory.md` beside their settings file
(scope `user`, in every repository).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from kestrel import memory_store
from kestrel.agent.prompt import repository_root
from kestrel.memory_store import Entry, MemoryEntryError, Scope
from kestrel.settings_load import user_settings_path
from kestrel.tui.dialogs import TextScreen

if TYPE_CHECKING:
    from kestrel.tui.app import KestrelApp

USAGE = "/memory [list] · /memory add [--user] TEXT · /memory rm ID"
_SCOPES: dict[str, Scope] = {"project": "project", "user": "user"}


@dataclass(frozen=True, slots=True)
class Addition:
    """`/memory add`'s words: the scope and the entry."""

    scope: Scope
    text: str


def parse_add(arguments: str) -> Addition:
    """`[--user | --project | --scope user|project | -s user|project] TEXT`."""
    words = arguments.split(maxsplit=1)
    scope: Scope = "project"
    while words and words[0].startswith("-"):
        flag, rest = words[0], words[1] if len(words) > 1 else ""
        if flag in ("--user", "--project"):
            scope = _SCOPES[flag[2:]]
        elif flag in ("--scope", "-s"):
            name, _, rest = rest.partition(" ")
            if name not in _SCOPES:
                raise MemoryEntryError("the scope is project (this repository) or user (yours)")
            scope = _SCOPES[name]
        else:
            raise MemoryEntryError(f"unknown option {flag}; {USAGE}")
        words = rest.split(maxsplit=1)
    return Addition(scope=scope, text=" ".join(words))


def listing(found: list[Entry]) -> str:
    """The entries, one a line, with their ids, scopes and sources."""
    if not found:
        return "Nothing remembered yet: /memory add TEXT adds a convention."
    lines = []
    for entry in found:
        source = f"  ({entry.source})" if entry.source else ""
        lines.append(f"{entry.id}  [{entry.scope}]  {entry.text}{source}")
    return "\n".join(lines)


async def run(view: KestrelApp, arguments: str) -> None:
    """Carry out `/memory ...`; a mistake is said in the conversation."""
    action, _, rest = arguments.partition(" ")
    rest = rest.strip()
    repository, user_dir = _places(view.driver.cwd)
    try:
        if action in ("", "list"):
            found = memory_store.entries(repository, user_dir)
            body = f"{listing(found)}\n\n{USAGE}"
            view.push_screen(TextScreen("What new sessions start with", Text(body)))
        elif action == "add":
            asked = parse_add(rest)
            entry = memory_store.add(asked.scope, repository, user_dir, asked.text, "added by hand")
            view.notice(
                f"Remembered ({entry.id}, {entry.scope}): {entry.text}; new sessions start with it"
            )
        elif action in ("rm", "remove"):
            if not rest:
                raise MemoryEntryError(f"which entry? {USAGE}")
            gone = memory_store.remove(rest, repository, user_dir)
            view.notice(f"Forgot ({gone.id}, {gone.scope}): {gone.text}")
        else:
            view.notice(f"/memory {action} is not a memory command: {USAGE}", error=True)
    except (MemoryEntryError, OSError) as exc:
        view.notice(str(exc).replace("`kestrel memory list`", "/memory list"), error=True)


def _places(cwd: Path) -> tuple[Path, Path]:
    """The repository whose entries count here, and the user's settings folder."""
    user_dir = user_settings_path(env=os.environ, home=Path.home()).parent
    return repository_root(cwd.resolve()), user_dir
