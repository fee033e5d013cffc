"""Which flag has no effect where it is given, and why (the rules, without a process)."""

from __future__ import annotations

from typing import Any

import pytest

from kestrel.cli.idle_flags import idle_after_finish, idle_flag

RUN: dict[str, Any] = {"task": "fix it", "print_mode": False, "output_format": "text"}


def test_output_format_without_print_is_idle() -> None:
    found = idle_flag("run", frozenset({"output_format"}), RUN, terminal=True)
    assert found is not None and found[0] == "output_format"
    assert found[1].startswith("only applies with -p (headless)")


def test_output_format_with_print_or_left_out_is_fine() -> None:
    headless = {**RUN, "print_mode": True}
    assert (
        idle_flag("run", frozenset({"output_format", "print_mode"}), headless, terminal=True)
        is None
    )
    assert idle_flag("run", frozenset(), RUN, terminal=False) is None


@pytest.mark.parametrize(("command", "name"), [("run", "task"), ("resume", "message")])
@pytest.mark.parametrize("blank", ["", "  \n"])
def test_an_empty_task_or_message_is_refused(command: str, name: str, blank: str) -> None:
    found = idle_flag(command, frozenset({name}), {**RUN, "task": None, name: blank}, terminal=True)
    assert found is not None and found[0] == name and "empty" in found[1]


@pytest.mark.parametrize("flag", ["output_format", "permission_mode", "allow", "deny"])
def test_a_rewind_without_a_message_runs_nothing_so_run_flags_are_idle(flag: str) -> None:
    values = {"message": None, "print_mode": True, "output_format": "json"}
    found = idle_flag("rewind", frozenset({flag, "print_mode"}), values, terminal=True)
    assert found is not None and found[0] == flag and "without a message" in found[1]
    # At a terminal the rewind asks what to do next, so they apply to that run.
    asked = {"message": None, "print_mode": False}
    if flag != "output_format":
        assert idle_flag("rewind", frozenset({flag}), asked, terminal=True) is None
    # With a message they apply to the run after the rewind.
    given = {**values, "message": "now fix it"}
    assert idle_flag("rewind", frozenset({flag, "print_mode"}), given, terminal=False) is None


def test_run_flags_of_a_finished_session_without_a_message() -> None:
    unset = {"--model": None, "--max-turns": None, "--allow": ()}
    assert idle_after_finish(unset) is None
    assert idle_after_finish({**unset, "--allow": ("Bash(ls)",)}) == "--allow"
    assert idle_after_finish({**unset, "--max-turns": 3}) == "--max-turns"
