"""One session driven from two processes: one runs it, the other answers its permission
questions, stops it, and reviews its change. Every answer goes through the session's log."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator

import pytest
from cli_kit import Env, Terminal, lines_of

_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_run_left_behind() -> Iterator[None]:
    """A failing test must not leave a run waiting for an answer forever."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


BASH_THEN_DONE = [
    {
        "text": "Creating the file.",
        "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > made.txt"}}],
    },
    {"text": "All done."},
]


def _start_waiting(env: Env) -> tuple[subprocess.Popen[str], str]:
    """Start a headless run that waits for approvals; return it once it asks, with its id."""
    env.script.write_text(json.dumps(BASH_THEN_DONE))
    proc = env.start(
        "-p",
        "make a file",
        "--model",
        f"scripted:{env.script}",
        "--wait-for-approvals",
        "--output-format",
        "stream-json",
    )
    _started.append(proc)
    assert proc.stdout is not None
    for line in proc.stdout:
        record = json.loads(line)
        if record["event"]["type"] == "approval_requested":
            assert record["event"]["name"] == "bash"
            return proc, str(record["session_id"])
    raise AssertionError(f"never asked; stderr: {proc.stderr.read() if proc.stderr else ''}")


def test_a_second_process_answers_the_question_and_then_applies_the_change(env: Env) -> None:
    proc, session_id = _start_waiting(env)
    listed = env.run("approve", session_id, "--list")
    assert listed.returncode == 0, listed.stderr
    (question,) = lines_of(listed.stdout)
    assert question["tool"] == "bash" and "echo hi" in str(question["arguments"])

    answered = env.run("approve", session_id[:8])
    assert answered.returncode == 0, answered.stderr
    assert "Allowed bash" in answered.stdout
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    events = [r["event"] for r in lines_of(out)]
    decided = next(e for e in events if e["type"] == "approval_decided")
    assert (decided["allow"], decided["by"]) == (True, "kestrel approve")
    permission = next(e for e in events if e["type"] == "permission_decided")
    assert (permission["decision"], permission["decided_by"]) == ("allow", "user")
    assert not (env.project / "made.txt").exists()  # Default mode: the change waits for review.

    again = env.run("approve", session_id)  # Nothing is open any more.
    assert again.returncode == 2 and "no open permission question" in again.stderr

    applied = env.run("apply", session_id)
    assert applied.returncode == 0, applied.stderr
    assert (env.project / "made.txt").read_text() == "hi\n"


def test_a_denial_from_another_process_reaches_the_model_with_its_message(env: Env) -> None:
    proc, session_id = _start_waiting(env)
    denied = env.run("approve", session_id, "--deny", "-m", "not on this machine")
    assert denied.returncode == 0, denied.stderr
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    finished = [r["event"] for r in lines_of(out) if r["event"]["type"] == "tool_finished"]
    assert "not on this machine" in finished[0]["content"]
    assert finished[0]["is_error"]


def test_the_terminal_prompt_is_settled_by_an_answer_from_elsewhere(env: Env) -> None:
    env.script.write_text(json.dumps(BASH_THEN_DONE))
    term = Terminal(env, "make a file", "--model", f"scripted:{env.script}")
    term.expect("Allow bash?")
    found = re.search(r"session ([0-9a-f]{20})", term.seen)
    assert found, term.seen
    answered = env.run("approve", found.group(1), "--always")
    assert answered.returncode == 0, answered.stderr
    term.expect("allowed by kestrel approve")
    term.expect("All done.")
    term.expect("── done")
    term.type("")  # No follow-up.
    term.expect("Apply this change to your checkout?")
    term.type("n")
    assert term.close() == 0


def test_cancel_from_another_process_stops_the_run_and_resume_continues(env: Env) -> None:
    proc, session_id = _start_waiting(env)
    cancelled = env.run("cancel", session_id)
    assert cancelled.returncode == 0, cancelled.stderr
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130
    last = lines_of(out)[-1]["event"]
    assert (last["type"], last["reason"]) == ("session_finished", "cancelled")
    assert "kestrel cancel" in last["detail"]

    again = env.run("cancel", session_id)
    assert again.returncode == 2 and "not running" in again.stderr


def test_an_answer_given_while_no_process_runs_is_used_on_resume(env: Env) -> None:
    proc, session_id = _start_waiting(env)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    answered = env.run("approve", session_id)  # The question is still open in the log.
    assert answered.returncode == 0, answered.stderr

    resumed = env.run(
        "resume", session_id, "-p", "--output-format", "stream-json", "--wait-for-approvals"
    )
    assert resumed.returncode == 0, resumed.stderr
    events = [r["event"] for r in lines_of(resumed.stdout)]
    assert not [e for e in events if e["type"] == "approval_requested"]  # Not asked again.
    ran = [e for e in events if e["type"] == "tool_finished"]
    assert ran and not ran[0]["is_error"]


def test_a_headless_text_run_says_on_stderr_what_it_waits_for(env: Env) -> None:
    env.script.write_text(json.dumps(BASH_THEN_DONE))
    proc = env.start(
        "-p", "make a file", "--model", f"scripted:{env.script}", "--wait-for-approvals"
    )
    _started.append(proc)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("kestrel: waiting for approval: bash"), line
    found = re.search(r"kestrel approve ([0-9a-f]{20})", line)
    assert found, line
    assert env.run("approve", found.group(1)).returncode == 0
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "All done." in out


def test_the_terminal_shows_a_stop_asked_from_elsewhere(env: Env) -> None:
    env.script.write_text(json.dumps(BASH_THEN_DONE))
    term = Terminal(env, "make a file", "--model", f"scripted:{env.script}")
    term.expect("Allow bash?")
    found = re.search(r"session ([0-9a-f]{20})", term.seen)
    assert found, term.seen
    assert env.run("cancel", found.group(1)).returncode == 0
    term.expect("Stop asked by kestrel cancel.")
    term.expect(f"Resume with: kestrel resume {found.group(1)}")
    assert term.close() == 130
