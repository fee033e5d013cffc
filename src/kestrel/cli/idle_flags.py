"""Flags that would do nothing where they are given are refused with the reason, not ignored.

A person who writes `kestrel "task" --output-format json` expects JSON; printing the usual
terminal view instead leaves them guessing. Each rule names a flag, the mode in which it has no
effect, and what to do instead; a command that uses `StrictCommand` checks them before it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import typer
from typer.core import TyperCommand

from kestrel.cli.exit_codes import EXIT_USAGE

_REWIND_RUN_FLAGS = ("output_format", "permission_mode", "allow", "deny")
"""What a rewind passes on to the run after it: idle when no run follows."""


def idle_flag(
    command: str, given: frozenset[str], values: Mapping[str, Any], *, terminal: bool
) -> tuple[str, str] | None:
    """The first parameter given on the command line that would have no effect, with the reason.

    `given`: the parameters typed on the command line; `values`: every parameter's value;
    `terminal`: standard input is a terminal (someone can be asked).
    """
    for name in ("task", "message"):
        text = values.get(name)
        if isinstance(text, str) and not text.strip():
            return name, _empty(command, name)
    headless = bool(values.get("print_mode"))
    if "output_format" in given and not headless:
        return "output_format", (
            "only applies with -p (headless); add -p, e.g. "
            'kestrel -p "fix the failing test" --output-format json'
        )
    if command == "rewind" and values.get("message") is None and (headless or not terminal):
        for name in _REWIND_RUN_FLAGS:
            if name in given:
                return name, (
                    "has no effect without a message: the rewind only restores the files; say "
                    'what to do from there: kestrel rewind ID CHECKPOINT "what now"'
                )
    return None


def _empty(command: str, name: str) -> str:
    if command == "run":
        return 'the task is empty; say what to do, e.g. kestrel "fix the failing test"'
    return f"the {name} is empty; leave it out or say what to do next"


class StrictCommand(TyperCommand):
    """A command that refuses, with exit code 2, flags that have no effect where they are given."""

    def invoke(self, ctx: Any) -> Any:  # Typer's click Context: its module is private.
        """Check the flags, then run the command."""
        given = frozenset(
            name
            for name in ctx.params
            if (source := ctx.get_parameter_source(name)) is not None
            and source.name == "COMMANDLINE"
        )
        problem = idle_flag(self.name or "", given, ctx.params, terminal=sys.stdin.isatty())
        if problem is not None:
            name, reason = problem
            label = "" if name in ("task", "message") else f"{_option(self, name)} "
            typer.echo(f"kestrel: {label}{reason}", err=True)
            raise typer.Exit(EXIT_USAGE)
        return super().invoke(ctx)


def _option(command: TyperCommand, name: str) -> str:
    """The long spelling of a parameter's option (`--output-format`)."""
    for param in command.params:
        if param.name == name and param.opts:
            return max(param.opts, key=len)
    return name


def idle_after_finish(flags: Mapping[str, object]) -> str | None:
    """The first run flag (`--max-turns`, …) given to a finished session resumed without a
    message and without a terminal: no run follows, so it would do nothing."""
    for flag, value in flags.items():
        if value not in (None, (), []):
            return flag
    return None
