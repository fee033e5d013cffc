"""What the shell parser reports: simple commands, their redirections, and risky constructs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.policy.shell_words import Redirect, _base

__all__ = ["Risk", "RiskKind", "ShellParse", "SimpleCommand", "Via"]

RiskKind = Literal[
    "substitution",
    "process-substitution",
    "eval",
    "source",
    "inline-code",
    "heredoc",
    "pipe-to-interpreter",
    "dynamic-command",
    "function-definition",
    "syntax-error",
]
Via = Literal["top", "substitution", "process-substitution", "wrapper", "inline-code"]
"""How a command was reached: directly, inside `$(..)`/backticks, inside `<(..)`/`>(..)`,
unwrapped from a wrapper (`sudo`, `timeout`, `find -exec`), or parsed from inline code
(`sh -c`, `eval`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleCommand:
    """One command that could run: its words with quotes removed, and where it sits."""

    words: tuple[str, ...]
    assignments: tuple[str, ...]
    text: str
    redirects: tuple[Redirect, ...]
    dynamic: bool
    """Some word is only known at run time ($VAR, $(..)); globs do not count."""
    pipeline: int
    stage: int
    nested: bool
    parent: int | None = None
    """Index in `ShellParse.commands` of the command that holds this one (its wrapper, the
    command whose word holds the substitution, the shell given the inline code)."""
    via: Via = "top"

    @property
    def name(self) -> str:
        """The command's base name (`/usr/bin/rm` -> `rm`), "" when there are no words."""
        return _base(self.words[0]) if self.words else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Risk:
    """A construct that hides what will run from someone reading the command."""

    kind: RiskKind
    detail: str
    command: int | None = None
    """Index in `ShellParse.commands` of the command the construct belongs to, when known."""
    at: int | None = None
    """For inline code: the index of the first word that makes the command run code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellParse:
    """A parsed command line: its simple commands in source order, and its risky constructs."""

    source: str
    commands: tuple[SimpleCommand, ...]
    risks: tuple[Risk, ...]
