"""The system prompt: how Kestrel works, where it is, and the project's memory files."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kestrel.protocol.events import TodoItem
from kestrel.protocol.messages import Message, ToolResultTurn, UserTurn

MEMORY_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_MEMORY_CHARS = 40_000


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFile:
    """One memory file's path and text (cut, with a note, past `MAX_MEMORY_CHARS`)."""

    path: Path
    text: str


def repository_root(cwd: Path) -> Path:
    """The nearest directory at or above `cwd` holding `.git`, else `cwd` itself."""
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return cwd


def find_memory_files(cwd: Path, *, user_config_dir: Path | None = None) -> list[Path]:
    """Memory files in load order: the user's own, then from the repository root down to `cwd`."""
    cwd = cwd.resolve()
    root = repository_root(cwd)
    chain = [cwd, *cwd.parents]
    directories = list(reversed(chain[: chain.index(root) + 1]))
    if user_config_dir is not None:
        directories.insert(0, user_config_dir)
    return [d / name for d in directories for name in MEMORY_FILE_NAMES if (d / name).is_file()]


def load_memory(paths: Sequence[Path]) -> list[MemoryFile]:
    """Read memory files; an unreadable one is skipped, a huge one is cut with a note."""
    loaded = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > MAX_MEMORY_CHARS:
            text = (
                text[:MAX_MEMORY_CHARS]
                + f"\n[kestrel: {path} is {len(text)} characters; the rest was left out]"
            )
        loaded.append(MemoryFile(path=path, text=text))
    return loaded


_BASE = """\
You are Kestrel, an autonomous coding agent working in a software repository on the user's behalf.
Finish the user's task end to end: find the relevant code, change it, run the tests or the build to
check the change, fix what broke, then give a short summary of what you changed and how you
verified it.

How to work:
- Use the tools to look before you change anything: list_files and grep to find code, read_file to
  read it (read a file before editing it).
- Make the smallest change that solves the task; follow the conventions of the surrounding code.
- edit_file replaces an exact, unique piece of text: copy old_str from read_file output without the
  line-number prefix. lazy_edit rewrites a large region, leaving unchanged code out behind
  `# ... existing code ...` comments. write_file is for new files or complete rewrites.
- Run commands with bash (tests, builds, linters). Commands run in the working directory; they do
  not keep state such as `cd` between calls.
- Output that is too long is cut with a note saying where the full text is; page through it with
  read_file when you need it.
- A tool result that says a call was denied means the user did not allow it: do not retry the same
  call; find another way or explain what you need.
- When the task is done, reply without calling any tool: that ends your turn.
"""


def build_system_prompt(*, cwd: Path, memory: Sequence[MemoryFile], today: str) -> str:
    """The whole system prompt, stable across a session so providers can cache it.

    The parts run from the most to the least stable: Kestrel's own instructions, the memory
    files, then the environment (working directory and date), so that a prompt cache keyed on
    the prefix keeps as much as possible when only the directory or the day differs.
    """
    parts = [_BASE]
    for item in memory:
        parts.append(
            f"Project instructions from {item.path} (follow them):\n<memory-file>\n"
            f"{item.text.strip()}\n</memory-file>\n"
        )
    parts.append(
        "Environment:\n"
        f"- Working directory: {cwd}\n"
        f"- Repository root: {repository_root(cwd)}\n"
        f"- Platform: {platform.system()} {platform.machine()}\n"
        f"- Date: {today}\n"
    )
    return "\n".join(parts)


TASK_LIST_OPEN = "<task-list>"
TASK_LIST_CLOSE = "</task-list>"


def task_list_block(items: Sequence[TodoItem]) -> str:
    """The task list exactly as the model is shown it each step, delimited so that it can be
    found and kept word for word (e.g. through a compaction); empty when there is no list."""
    if not items:
        return ""
    lines = [
        TASK_LIST_OPEN,
        "The session's task list (keep it current with the todo tool):",
        *(f"- [{item.status}] {item.id}: {item.text}" for item in items),
        TASK_LIST_CLOSE,
    ]
    return "\n".join(lines)


def with_task_list(messages: Sequence[Message], items: Sequence[TodoItem]) -> tuple[Message, ...]:
    """The conversation for one request, with the task list after its latest message.

    The list goes at the end, not in the system prompt, so the cacheable prefix stays stable;
    it is not stored in the conversation, so each request shows only the current list.
    """
    block = task_list_block(items)
    if not block:
        return tuple(messages)
    last = messages[-1] if messages else None
    if isinstance(last, UserTurn):
        return (*messages[:-1], replace(last, text=f"{last.text}\n\n{block}"))
    if isinstance(last, ToolResultTurn):
        return (*messages[:-1], replace(last, content=f"{last.content}\n\n{block}"))
    return (*messages, UserTurn(text=block))
