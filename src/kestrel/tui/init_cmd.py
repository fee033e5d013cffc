"""`/init`: a starting AGENTS.md for the repository, from the context engine's repository map.

A new AGENTS.md gets headings for the person to fill in (commands, conventions) and a layout
section: the repository map, the best-connected files with their main definitions. An existing
AGENTS.md is never written without asking: the view shows the layout section it would add (or
the one it would replace, when an earlier `/init` wrote one) and the person decides.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from kestrel.agent.prompt import repository_root
from kestrel.tools.code import RankedMap
from kestrel.tui.dialogs import ConfirmScreen

if TYPE_CHECKING:
    from kestrel.tui.app import KestrelApp

FILE_NAME = "AGENTS.md"
MAP_TOKENS = 1200
"""The map's budget: AGENTS.md is read into every session, so it stays short."""
HEADING = "## Layout"
MARKER = "<!-- kestrel: repository map; /init writes it again -->"

INTRO = """\
# AGENTS.md

Notes for coding agents (Kestrel and others) working in this repository; every session starts
by reading them. Keep them short: what an agent cannot quickly learn from the code itself.

## Commands

- Set up: (the command that installs what the project needs)
- Test: (the command that runs the tests, and how to run one test)
- Lint and type-check: (the commands, if any)

## Conventions

- (style, naming, libraries to use or avoid, what a change must come with)
"""


def layout_section(ranked: RankedMap) -> str:
    """The layout section: the repository map, fenced, under its heading and marker."""
    shown = ranked.rendered
    if not shown.files_shown:
        body = "Kestrel found no source files to map."
    else:
        body = (
            f"The best-connected source files ({len(shown.files_shown)} of "
            f"{ranked.files_ranked}) with their main definitions (`LINE: signature`), from "
            f"Kestrel's repository map:\n\n```text\n{shown.text}\n```"
        )
    return f"{HEADING}\n\n{MARKER}\n{body}\n"


def starting_text(section: str) -> str:
    """A new AGENTS.md: the headings to fill in, then the layout section."""
    return f"{INTRO}\n{section}"


def merged(existing: str, section: str) -> str:
    """`existing` with its layout section (one an earlier /init wrote) replaced by `section`,
    or `section` added at its end."""
    lines = existing.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.strip() == MARKER), None)
    if at is None:
        return f"{existing.rstrip()}\n\n{section}" if existing.strip() else section
    start = at
    while start > 0 and not lines[start - 1].strip():
        start -= 1
    if start > 0 and lines[start - 1].strip() == HEADING:
        start -= 1
    else:
        start = at
    after = "".join(lines[_section_end(lines, at) :])
    return "".join(lines[:start]) + section + ("\n" + after if after else "")


def _section_end(lines: list[str], at: int) -> int:
    """The line where the next `## ` heading after line `at` starts (outside code fences)."""
    fenced = False
    for index in range(at + 1, len(lines)):
        if lines[index].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[index].startswith("## "):
            return index
    return len(lines)


async def run(view: KestrelApp, arguments: str) -> None:
    """Write AGENTS.md, or ask before changing the one there is."""
    if arguments:
        view.notice("/init takes no arguments: it writes AGENTS.md at the repository's root.")
        return
    root = repository_root(view.driver.cwd.resolve())
    view.notice("Reading the repository map…")
    section = layout_section(await view.index.repo_map(root, MAP_TOKENS))
    target = root / FILE_NAME
    existing = await asyncio.to_thread(_read, target)
    if existing is None:
        await asyncio.to_thread(_create, target, starting_text(section))
        view.notice(
            f"Wrote {FILE_NAME}: fill in its commands and conventions; every new session reads it."
        )
        return
    proposal = merged(existing, section)
    if proposal == existing:
        view.notice(f"{FILE_NAME} already holds this repository map: nothing to add.")
        return
    replacing = MARKER in existing
    what = "replace its layout section with" if replacing else "add at its end"
    screen = ConfirmScreen(
        f"{FILE_NAME} is already there: /init would {what}",
        Text(section),
        "Replace the layout" if replacing else "Add the layout",
        f"Leave {FILE_NAME} as it is",
    )
    if await view.ask(screen):
        await asyncio.to_thread(target.write_text, proposal, encoding="utf-8")
        view.notice(f"Updated the layout section of {FILE_NAME}.")
    else:
        view.notice(f"{FILE_NAME} left as it is.")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _create(path: Path, text: str) -> None:
    with path.open("x", encoding="utf-8") as file:  # Never over a file made meanwhile.
        file.write(text)
