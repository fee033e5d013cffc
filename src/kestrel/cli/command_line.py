"""From the words typed to the command that runs: a command, `help`, or a task.

A command line whose first word is a command runs that command. Anything else is a task, unless
its first word is a command's name or one edit away from one: then the person is asked "did you
mean …?" at a terminal, and refused (exit 2, nothing started) anywhere else.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

from kestrel.cli.command_words import ONE_WORD_HINT, Misread, misread, positionals, value_options
from kestrel.cli.exit_codes import EXIT_ERROR, EXIT_USAGE
from kestrel.cli.store_errors import store_error_code, store_error_line
from kestrel.protocol.errors import StoreError
from kestrel.protocol.oserrors import os_error_text

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
"""Context settings of every command: `-h` is `--help` (subcommands inherit it)."""

HELP = "help"

Commands = Callable[..., None]
"""Runs a subcommand's words (`app(args, prog_name=...)`); it may import the command first."""


def show_version(value: bool) -> None:
    """`--version`: print `kestrel X.Y.Z` and exit."""
    if value:
        from kestrel.app_store import version

        typer.echo(f"kestrel {version()}")
        raise typer.Exit()


def positive(value: float | None) -> float | None:
    """Validate an amount that must be more than 0 (`--max-cost`)."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be more than 0 (got {value:g})")
    return value


def dispatch(
    args: list[str], *, run_app: typer.Typer, commands_app: Commands, commands: Sequence[str]
) -> None:
    """Run the command `args` name, the help asked for, or the task they give."""
    if args and args[0] == HELP:
        _help(args[1:], run_app=run_app, commands_app=commands_app, commands=commands)
    if args and args[0] in commands:
        with _system_errors_as_sentences():
            commands_app(args, prog_name="kestrel")
        return
    takes_value = value_options(typer.main.get_command(run_app).params)
    try:
        wrong = misread(args, (*commands, HELP), takes_value)
    except LookupError:
        _check_one_task(args, takes_value)
        try:
            with _system_errors_as_sentences():
                run_app(args, prog_name="kestrel")
        except SystemExit as exc:
            # Click reports usage errors with exit code 2 already; keep every other code as is.
            raise SystemExit(exc.code if exc.code is not None else EXIT_USAGE) from None
        return
    meant = _confirm(wrong, headless=_headless(args, takes_value))
    dispatch(list(meant), run_app=run_app, commands_app=commands_app, commands=commands)


@contextmanager
def _system_errors_as_sentences() -> Iterator[None]:
    """An operating-system error no command expected (a folder removed meanwhile, a full disk)
    ends the command with one sentence and exit code 1, not a traceback."""
    try:
        yield
    except OSError as exc:
        typer.echo(f"kestrel: {os_error_text(exc)}", err=True)
        raise SystemExit(EXIT_ERROR) from None
    except StoreError as exc:  # Whichever command met it: 2 if unopenable, 1 if a session stopped.
        typer.echo(store_error_line(exc), err=True)
        raise SystemExit(store_error_code(exc)) from None


def _headless(args: Sequence[str], takes_value: frozenset[str]) -> bool:
    """Whether nobody can be asked: `-p`, or standard input is not a terminal."""
    if not sys.stdin.isatty():
        return True
    free = set(positionals(args, takes_value))
    options = [a for i, a in enumerate(args) if i not in free and a.startswith("-")]
    return any(
        a == "--print" or (a.startswith("-") and not a.startswith("--") and "p" in a[1:])
        for a in options
    )


def _confirm(wrong: Misread, *, headless: bool) -> tuple[str, ...]:
    """The command line to run instead, when the person says so; else refuse and exit 2."""
    if headless or not wrong.one_word:
        _refuse(wrong.problem, ONE_WORD_HINT if wrong.one_word else None)
    typer.echo(f"Did you mean `{wrong.suggestion}`? [y/N] ", nl=False, err=True)
    try:
        answer = input()
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return wrong.corrected
    _refuse(f'"{wrong.word}" was not run as a task.', ONE_WORD_HINT)


def _check_one_task(args: Sequence[str], takes_value: frozenset[str]) -> None:
    """A task is one argument: several words unquoted are refused with the quoted form."""
    words = [args[i] for i in positionals(args, takes_value)]
    if len(words) > 1:
        quoted = shlex.quote(" ".join(words))
        _refuse(f"a task is one argument; put it in quotes: kestrel {quoted}")


def _help(
    topic: list[str], *, run_app: typer.Typer, commands_app: Commands, commands: Sequence[str]
) -> NoReturn:
    """`kestrel help [COMMAND ...]`: the help of Kestrel, or of a command."""
    if not topic or topic[0] in commands:  # Each app prints its help and exits.
        app, args = (commands_app, [*topic, "--help"]) if topic else (run_app, ["--help"])
        app(args, prog_name="kestrel")
        raise SystemExit(0)
    try:
        wrong = misread(topic[:1], commands, ())
    except LookupError:
        _refuse(f'"{topic[0]}" is not a command; the commands are: {", ".join(sorted(commands))}')
    _refuse(f'"{topic[0]}" is not a command; did you mean `kestrel help {wrong.command}`?')


def _refuse(message: str, hint: str | None = None) -> NoReturn:
    typer.echo(f"kestrel: {message}", err=True)
    if hint:
        typer.echo(hint, err=True)
    raise SystemExit(EXIT_USAGE)
