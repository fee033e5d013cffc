"""What a tool call is about, as policy sees it: the tool, its paths, its command, its URL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.protocol.events_base import ToolKind


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSubject:
    """One tool call described for rules, hooks and the classifier.

    The tools layer builds it, since only a tool knows which of its arguments are paths.
    """

    tool: str
    kind: ToolKind | None
    root: Path
    """The workspace; relative paths are relative to it."""
    aliases: tuple[str, ...] = ()
    """Other names of the tool, e.g. `Bash` for `bash`, as hooks written for Claude Code use."""
    paths: tuple[str, ...] = ()
    """Every file or folder the call reads or writes, as the model gave it."""
    command: str | None = None
    """The shell command, for tools that run one."""
    url: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The call's arguments, parsed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandPart:
    """One simple command of a shell command line, as rules match it."""

    text: str
    words: tuple[str, ...]
    """The words with quotes removed; assignments other than harmless ones come first."""
    exempt: bool = False
    """Needs no allow rule of its own: a wrapper (`timeout 5 CMD`) whose inner command is
    listed separately, or a builtin that changes nothing but the shell (`cd`, `true`). Deny and
    ask rules still apply to it."""
    plain_heredoc: bool = False
    """Fed by a heredoc whose body is plain text (quoted delimiter, or nothing to expand)."""
    lead: int = 0
    """How many assignments come before the command's own words in `words`."""
