"""A new user's first commands and first mistakes: each gets the answer a person expects.

Every test runs the real `kestrel` with a fresh HOME and asserts the exact first line it prints,
its exit code, and that no traceback or Python repr reached the person.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from kit import NewUser, Result, assert_clean

ONE_WORD_HINT = 'Nothing was started. A one-word task needs a few more words: kestrel "..."'
RUN_USAGE = "Usage: kestrel [OPTIONS] [task]"


def lines(result: Result, stream: str = "text") -> list[str]:
    """The non-empty lines of `stream`, stripped."""
    return [line.strip() for line in getattr(result, stream).splitlines() if line.strip()]


def nothing_started(user: NewUser) -> bool:
    """No session exists (nothing was sent to a model)."""
    listed = user.run("sessions", "list", "--json")
    return listed.code == 0 and json.loads(listed.out) == []


def script(tmp_path: Path, turns: list[dict[str, object]]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return path


def headless(user: NewUser, task: str, model: Path, *extra: str, cwd: Path | None = None) -> Result:
    """A headless scripted session, unconfined and on the checkout, as the JSON result."""
    return user.run(
        "-p",
        task,
        "--model",
        f"scripted:{model}",
        "--sandbox",
        "none",
        "--workspace",
        "direct",
        *extra,
        cwd=cwd,
    )


# --- asking for help and the version ---------------------------------------------------------


def test_version(user: NewUser) -> None:
    done = user.run("--version")
    assert (done.code, done.out) == (0, f"kestrel {metadata.version('kestrel')}\n")
    assert_clean(done)


@pytest.mark.parametrize("ask", [["-h"], ["--help"], ["help"]])
def test_help_three_ways(user: NewUser, ask: list[str]) -> None:
    done = user.run(*ask)
    assert (done.code, done.first_line("out")) == (0, RUN_USAGE)
    flat = " ".join(done.out.split())
    assert "kestrel doctor" in flat and "kestrel help COMMAND" in flat
    assert "--version" in flat
    assert_clean(done)


@pytest.mark.parametrize("ask", [["sessions", "-h"], ["help", "sessions"]])
def test_help_of_a_command(user: NewUser, ask: list[str]) -> None:
    done = user.run(*ask)
    assert done.code == 0
    assert done.first_line("out") == "Usage: kestrel sessions [OPTIONS] COMMAND [ARGS]..."
    assert_clean(done)


def test_help_on_a_misspelt_command(user: NewUser) -> None:
    done = user.run("help", "sesions")
    assert done.code == 2
    assert done.first_line() == (
        'kestrel: "sesions" is not a command; did you mean `kestrel help sessions`?'
    )
    assert_clean(done)


# --- a command's name, or a typo of it, is never a task ----------------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"), [("hepl", "help"), ("doctr", "doctor"), ("sesions", "sessions")]
)
def test_a_one_word_typo_in_a_pipe_is_refused_and_starts_nothing(
    user: NewUser, typed: str, meant: str
) -> None:
    done = user.run(typed)
    assert done.code == 2
    assert lines(done) == [
        f'kestrel: "{typed}" is not a command; did you mean `kestrel {meant}`?',
        ONE_WORD_HINT,
    ]
    assert_clean(done)
    assert nothing_started(user)


def test_a_typo_with_print_is_refused_even_at_a_terminal(user: NewUser) -> None:
    done = user.run_tty("-p", "doctr")
    assert done.code == 2
    assert done.first_line() == 'kestrel: "doctr" is not a command; did you mean `kestrel doctor`?'
    assert "[y/N]" not in done.out
    assert_clean(done)


def test_a_command_name_after_task_flags_is_not_a_task(user: NewUser) -> None:
    done = user.run("-p", "sessions")
    assert done.code == 2
    assert done.first_line() == (
        'kestrel: "sessions" is a command, not a task; did you mean `kestrel sessions`?'
    )
    assert_clean(done)
    assert nothing_started(user)


def test_a_typo_with_follow_up_words_suggests_the_whole_command(user: NewUser) -> None:
    done = user.run("sesions", "list")
    assert done.code == 2
    assert lines(done) == [
        'kestrel: "sesions" is not a command; did you mean `kestrel sessions list`?'
    ]
    assert_clean(done)


def test_at_a_terminal_yes_runs_the_command_meant(user: NewUser) -> None:
    done = user.run_tty("hepl", keys=[("[y/N]", "y\n")])
    assert done.code == 0, done.out
    assert done.first_line() == "Did you mean `kestrel help`? [y/N] y"
    assert RUN_USAGE in done.out
    assert_clean(done)


def test_at_a_terminal_no_starts_nothing(user: NewUser) -> None:
    done = user.run_tty("sesions", keys=[("[y/N]", "n\n")])
    assert done.code == 2
    assert lines(done) == [
        "Did you mean `kestrel sessions`? [y/N] n",
        'kestrel: "sesions" was not run as a task.',
        ONE_WORD_HINT,
    ]
    assert_clean(done)
    assert nothing_started(user)


def test_an_unquoted_task_says_to_quote_it(user: NewUser) -> None:
    done = user.run("fix", "the", "bug")
    assert done.code == 2
    assert (
        done.first_line()
        == "kestrel: a task is one argument; put it in quotes: kestrel 'fix the bug'"
    )
    assert_clean(done)


# --- flags that would do nothing, and empty input ------------------------------------------------


def test_output_format_without_print_is_refused(user: NewUser) -> None:
    done = user.run("fix the failing test", "--output-format", "json")
    assert done.code == 2
    assert done.first_line() == (
        "kestrel: --output-format only applies with -p (headless); add -p, e.g. "
        'kestrel -p "fix the failing test" --output-format json'
    )
    assert_clean(done)
    assert nothing_started(user)


@pytest.mark.parametrize("task", ["", "   "])
def test_an_empty_task_is_a_usage_error(user: NewUser, task: str) -> None:
    done = user.run("-p", task)
    assert done.code == 2
    assert done.first_line() == (
        'kestrel: the task is empty; say what to do, e.g. kestrel "fix the failing test"'
    )
    assert_clean(done)


@pytest.mark.parametrize("query", ["", "  "])
def test_an_empty_search_is_a_usage_error(user: NewUser, query: str) -> None:
    done = user.run("search", query)
    assert (done.code, done.out) == (2, "")
    assert done.first_line() == (
        'kestrel: the search query is empty; say what to look for: kestrel search "QUERY"'
    )
    assert_clean(done)


def test_max_cost_help_and_check_agree(user: NewUser) -> None:
    shown = " ".join(user.run("--help").out.split())
    assert "Stop once this many US dollars are spent (more than 0)." in shown
    done = user.run("-p", "fix it", "--max-cost", "0")
    assert done.code == 2
    assert done.first_line() == RUN_USAGE
    assert "Invalid value for '--max-cost': must be more than 0 (got 0)" in done.err
    assert_clean(done)


def test_rewind_flags_without_a_message_are_refused(user: NewUser) -> None:
    done = user.run("rewind", "abc", "def", "-p", "--output-format", "json")
    assert done.code == 2
    assert done.first_line() == (
        "kestrel: --output-format has no effect without a message: the rewind only restores the "
        'files; say what to do from there: kestrel rewind ID CHECKPOINT "what now"'
    )
    assert_clean(done)


# --- the scripted model, and finished sessions ---------------------------------------------------


def test_a_script_that_runs_out_is_an_error_not_an_empty_answer(
    user: NewUser, tmp_path: Path
) -> None:
    model = script(
        tmp_path, [{"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}]
    )
    done = headless(user, "read calc.py", model)
    assert done.code == 1, done.text
    assert done.out == ""
    first = done.first_line("err")
    assert re.fullmatch(
        r"kestrel: session \w+ stopped \(error: ScriptExhausted: the scripted model has no more "
        rf"replies \(script {re.escape(str(model))} has 1 reply\)\); "
        r"continue it with: kestrel resume \w+",
        first,
    ), first
    assert_clean(done)


def test_resuming_a_finished_session_without_a_message_calls_no_model(
    user: NewUser, tmp_path: Path
) -> None:
    # One reply only: a second model call would end the session in error.
    model = script(tmp_path, [{"text": "Nothing to do."}])
    first = headless(user, "look around", model, "--output-format", "json")
    assert first.code == 0, first.text
    session = json.loads(first.out)["session_id"]
    done = user.run("resume", session, "-p")
    assert (done.code, done.out) == (0, "")
    assert done.first_line() == (
        f'Session {session} is finished. Follow up with: kestrel resume {session} "message"'
    )
    assert_clean(done)
    idle = user.run("resume", session, "-p", "--max-turns", "3")
    assert (idle.code, idle.first_line()) == (
        2,
        f"kestrel: --max-turns has no effect: session {session} is finished and no message was "
        f'given; follow up with: kestrel resume {session} "message" --max-turns ...',
    )
    as_json = user.run("resume", session, "-p", "--output-format", "json")
    assert as_json.code == 0, as_json.text
    result = json.loads(as_json.out)
    assert (result["session_id"], result["reason"], result["final_text"]) == (
        session,
        "done",
        "Nothing to do.",
    )
    at_terminal = user.run_tty("resume", session, keys=[("Enter leaves)", "\n")])
    assert at_terminal.code == 0, at_terminal.out
    assert at_terminal.first_line() == (
        f'Session {session} is finished. Follow up with: kestrel resume {session} "message" '
        "(or type it now; Enter leaves)"
    )
    assert_clean(at_terminal)
    exported = user.run("sessions", "export", session)
    kinds = [json.loads(line)["event"]["type"] for line in exported.out.splitlines()]
    assert kinds.count("model_request_started") == 1 and "error" not in kinds


# --- sentences, not Python -----------------------------------------------------------------------


def test_a_session_whose_folder_is_gone(user: NewUser, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(user.project, elsewhere)
    model = script(tmp_path, [{"text": "Nothing to do."}])
    first = headless(user, "look around", model, "--output-format", "json", cwd=elsewhere)
    assert first.code == 0, first.text
    session = json.loads(first.out)["session_id"]
    shutil.rmtree(elsewhere)
    gone = f"kestrel: session {session} worked in {elsewhere}, which no longer exists"
    for command in (["diff", session], ["apply", session], ["resume", session, "more", "-p"]):
        done = user.run(*command)
        assert (done.code, done.first_line()) == (2, gone), command
        assert_clean(done)


def test_the_map_footer_speaks_to_the_person(user: NewUser) -> None:
    done = user.run("map", env={"KESTREL_EMBEDDER": "none"})
    assert done.code == 0, done.text
    assert done.first_line("out") == "calc.py"
    assert re.fullmatch(
        r"1 of 1 source files shown \(~\d+ tokens\)\. "
        r"Run `kestrel search QUERY` to find code by what it does\.",
        done.first_line("err"),
    )
    assert "repo_map" not in done.text
    assert_clean(done)


def test_a_follow_up_typed_after_the_finished_note_continues_the_session(
    user: NewUser, tmp_path: Path
) -> None:
    model = script(tmp_path, [{"text": "First answer."}, {"text": "Second answer."}])
    first = headless(user, "look around", model, "--output-format", "json")
    session = json.loads(first.out)["session_id"]
    keys = [("Enter leaves)", "and now?\n"), ("Second answer.", "\n")]
    done = user.run_tty("resume", session, keys=keys)
    assert done.code == 0, done.out
    assert done.first_line().startswith(f"Session {session} is finished.")
    assert "Second answer." in done.out
    assert_clean(done)
