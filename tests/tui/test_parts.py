"""The view's parts: commands, custom commands, the status line, the prompt's history and
completion, a verification's block, and when `kestrel` opens the view at all."""

from __future__ import annotations

import fcntl
import os
import struct
import termios
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static

from kestrel.cli.tui_cmd import wants_tui
from kestrel.protocol.events import (
    CheckOutcome,
    Limits,
    Record,
    Totals,
    VerificationFinished,
    VerifyFailure,
)
from kestrel.tui.blocks import VerificationBlock
from kestrel.tui.commands import Slash, load_custom, parse_slash
from kestrel.tui.mentions import complete_mention
from kestrel.tui.prompt import History
from kestrel.tui.status import StatusFacts, model_label, status_text
from kestrel.tui.transcript import Transcript


def test_a_slash_names_a_command_but_a_path_does_not() -> None:
    assert parse_slash("/rewind") == Slash("rewind", "")
    assert parse_slash("  /model  openai:gpt-4.1 ") == Slash("model", "openai:gpt-4.1")
    assert parse_slash("/usr/bin/env is odd") is None
    assert parse_slash("//not a command") is None
    assert parse_slash("fix /tmp handling") is None


def test_custom_commands_project_over_user_and_arguments_replaced(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    user = home / ".config" / "kestrel" / "commands"
    user.mkdir(parents=True)
    (user / "review.md").write_text("User review of $ARGUMENTS.")
    (user / "tests.md").write_text("# Run the tests\nRun them all.")
    (user / "help.md").write_text("A built-in name is not taken.")
    mine = project / ".kestrel" / "commands"
    mine.mkdir(parents=True)
    (mine / "review.md").write_text("Project review of $ARGUMENTS, then $ARGUMENTS again.")
    found = load_custom(project, {}, home)
    assert sorted(found) == ["review", "tests"]
    assert found["review"].prompt("calc.py") == "Project review of calc.py, then calc.py again."
    assert found["tests"].prompt("fast") == "# Run the tests\nRun them all.\n\nfast"
    assert found["tests"].summary == "Run the tests"


def test_the_status_line_says_everything_in_one_place() -> None:
    totals = Totals(turns=3, input_tokens=1000, cache_read_tokens=3000, output_tokens=500)
    facts = StatusFacts(
        model="anthropic:claude-sonnet-4-5",
        mode="accept-edits",
        sandbox="bwrap",
        totals=totals,
        limits=Limits(max_cost_usd=2.0, max_turns=10),
        context_tokens=50_000,
        window_tokens=200_000,
        busy=True,
        queued=2,
    )
    assert status_text(facts) == (
        "● working +2 queued │ anthropic:claude-sonnet-4-5 │ accept-edits │ ctx 50k/200k 25% │ "
        "4.5k tok │ $0.0000 │ cache 75% │ budget $2.00 7 turns │ sandbox bwrap"
    )
    indexing = status_text(replace(facts, indexing=12_400))
    assert indexing.endswith(" │ sandbox bwrap │ indexing 12.4k files")


def test_a_scripted_model_is_named_by_its_file_only() -> None:
    assert model_label("scripted:/some/where/fix.json") == "scripted:fix.json"
    assert model_label("openai:gpt-4.1") == "openai:gpt-4.1"


def test_history_walks_back_and_returns_to_the_draft() -> None:
    history = History([])
    for sent in ("first", "second"):
        history.add(sent)
    assert history.back("draft") == "second"
    assert history.back("second") == "first"
    assert history.back("first") is None
    assert history.forward() == "second"
    assert history.forward() == "draft"
    assert history.forward() is None


def test_at_completes_a_file_name_as_far_as_it_is_certain() -> None:
    files = ["src/calc.py", "src/cli.py", "README.md"]
    assert complete_mention("look at @READ", files) == "look at @README.md "
    assert complete_mention("look at @src/c", files) is None  # calc.py or cli.py: no more.
    assert complete_mention("look at @src/ca", files) == "look at @src/calc.py "
    assert complete_mention("see @cli", files) == "see @src/cli.py "
    assert complete_mention("no mention", files) is None
    assert complete_mention("@zzz", files) is None


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal's two ends."""
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def test_the_view_opens_only_in_a_terminal_that_can_show_it(terminal: tuple[int, int]) -> None:
    _, slave = terminal
    tty = os.fdopen(os.dup(slave), "w")
    try:
        env = {"TERM": "xterm-256color"}
        # A fresh pseudo-terminal reports no size: nothing to draw on, so line mode.
        assert not wants_tui(headless=False, plain=False, env=env, stdin=tty, stdout=tty)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        assert wants_tui(headless=False, plain=False, env=env, stdin=tty, stdout=tty)
        assert not wants_tui(headless=True, plain=False, env=env, stdin=tty, stdout=tty)
        assert not wants_tui(headless=False, plain=True, env=env, stdin=tty, stdout=tty)
        dumb = {"TERM": "dumb"}
        assert not wants_tui(headless=False, plain=False, env=dumb, stdin=tty, stdout=tty)
        with open(os.devnull, "w") as pipe:
            assert not wants_tui(headless=False, plain=False, env=env, stdin=tty, stdout=pipe)
    finally:
        tty.close()


class _Host(App[None]):
    """A screen with one transcript on it."""

    def compose(self) -> ComposeResult:
        yield Transcript(timings=True)


async def test_a_failed_verification_is_shown_check_by_check_and_failure_by_failure() -> None:
    failure = VerifyFailure(
        kind="test",
        tool="pytest",
        message="assert 1 == 2\nmore detail",
        file="test_calc.py",
        line=4,
        test="test_add",
    )
    event = VerificationFinished(
        ok=False,
        blocking=True,
        checks=(CheckOutcome(name="pytest", status="failed", failures=1),),
        failures=(failure,),
        report="1 failure",
    )
    host = _Host()
    async with host.run_test() as pilot:
        await host.query_one(Transcript).render_record(
            Record(session_id="s", seq=1, at=0.0, event=event)
        )
        await pilot.pause()
        lines = [str(s.content) for s in host.query_one(VerificationBlock).query(Static)]
    assert lines == [
        "✗ verification failed: pytest failed",
        "test pytest test_calc.py:4 test_add: assert 1 == 2",
    ]
