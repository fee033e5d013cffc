"""Telling a command from a task: edit distance, the closest command, the free-standing words."""

from __future__ import annotations

import pytest

from kestrel.cli.command_words import (
    closest_command,
    edit_distance,
    misread,
    positionals,
    value_options,
)
from kestrel.cli.main import SUBCOMMANDS, run_app

NAMES = (*SUBCOMMANDS, "help")
TAKES_VALUE = frozenset({"--model", "-m", "--cwd", "--output-format"})


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("sessions", "sessions", 0),
        ("sesions", "sessions", 1),  # a letter dropped
        ("doctorr", "doctor", 1),  # a letter added
        ("dactor", "doctor", 1),  # a letter changed
        ("hepl", "help", 1),  # two neighbours swapped
        ("", "map", 3),
        ("fix", "diff", 3),
    ],
)
def test_edit_distance(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b) == distance == edit_distance(b, a)


@pytest.mark.parametrize(
    ("word", "command"),
    [
        ("sesions", "sessions"),
        ("doctr", "doctor"),
        ("hepl", "help"),
        ("Sessions", "sessions"),
        ("mpa", "map"),
        ("refactor", None),
        ("test", None),  # two edits from "trust"
        ("fix the bug", None),
        ("--plan", None),
    ],
)
def test_closest_command(word: str, command: str | None) -> None:
    assert closest_command(word, NAMES) == command


def test_two_commands_equally_close_suggest_neither() -> None:
    assert closest_command("cat", ("bat", "hat")) is None


def test_option_values_are_not_words() -> None:
    args = ["-m", "scripted:s.json", "--cwd=/x", "--plan", "-pm", "m", "fix", "--", "-y"]
    assert positionals(args, TAKES_VALUE) == [6, 8]


def test_the_run_command_lists_its_options_that_take_a_value() -> None:
    import typer

    found = value_options(typer.main.get_command(run_app).params)
    assert {"--model", "-m", "--cwd", "--output-format", "--max-cost"} <= found
    assert not {"-p", "--print", "--plan", "-c", "--continue"} & found


def test_a_typo_with_follow_up_words_keeps_them() -> None:
    wrong = misread(["sesions", "list", "--json"], NAMES, TAKES_VALUE)
    assert wrong.suggestion == "kestrel sessions list --json"
    assert (
        wrong.problem == '"sesions" is not a command; did you mean `kestrel sessions list --json`?'
    )
    assert not wrong.one_word


def test_a_command_name_after_task_options_is_not_a_task() -> None:
    wrong = misread(["-p", "--model", "m", "sessions"], NAMES, TAKES_VALUE)
    assert wrong.corrected == ("sessions",) and wrong.one_word
    assert wrong.problem == '"sessions" is a command, not a task; did you mean `kestrel sessions`?'


@pytest.mark.parametrize("args", [[], ["-p"], ["fix the failing test"], ["refactor"]])
def test_a_task_is_not_misread(args: list[str]) -> None:
    with pytest.raises(LookupError):
        misread(args, NAMES, TAKES_VALUE)
