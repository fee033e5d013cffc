"""Ctrl-C and SIGTERM as a new user meets them: at start-up, while a command runs, while the model
is answering, at a question, in the demo. Each ends with one line and exit 130 (143 for SIGTERM),
leaves no traceback and no temporary folder, and leaves the session cancelled and resumable."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from kit import KESTREL, NewUser, Result, assert_clean

WIDE = {"COLUMNS": "200"}
"""A wide terminal, so that no line the tests look for is wrapped."""
SLEEP: list[object] = [
    {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}
]
CARRY_ON: list[object] = [{"text": "Carried on."}]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SESSION = re.compile(r"session ([0-9a-f]{20})")


def script(user: NewUser, turns: Sequence[object]) -> str:
    """Write a scripted model's turns next to the project; the `--model` value for it."""
    path = user.project.parent / "script.json"
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def plain(text: str) -> str:
    """`text` without the terminal's colour codes."""
    return ANSI.sub("", text)


def after(result: Result, marker: str) -> list[str]:
    """The non-empty lines printed after the last line that holds `marker`, without colour."""
    lines = [line.strip() for line in plain(result.out).splitlines()]
    last = max(i for i, line in enumerate(lines) if marker in line)
    return [line for line in lines[last + 1 :] if line]


def session_id(result: Result) -> str:
    """The id of the session a terminal run showed."""
    found = SESSION.search(result.out)
    assert found is not None, result.out
    return found.group(1)


def status(user: NewUser, session: str) -> str:
    """The session's status as `kestrel sessions list` reports it."""
    listed = user.run("sessions", "list", "--json")
    assert listed.code == 0, listed.err
    (entry,) = [s for s in json.loads(listed.out) if s["session_id"] == session]
    return str(entry["status"])


def last_event(user: NewUser, session: str) -> dict[str, object]:
    """The last event of the session's log."""
    exported = user.run("sessions", "export", session)
    assert exported.code == 0, exported.err
    event: dict[str, object] = json.loads(exported.out.splitlines()[-1])["event"]
    return event


def assert_resumes(user: NewUser, session: str) -> None:
    """`kestrel resume` continues the session from its log: the script's next turn answers."""
    resumed = user.run("resume", session, "-p")
    assert (resumed.code, resumed.out.strip()) == (0, "Carried on."), resumed.err
    assert status(user, session) == "done"


def test_ctrl_c_during_start_up_prints_one_line(user: NewUser) -> None:
    # Python reports each import as it finishes; Ctrl-C lands while the rest are imported.
    result = user.run_tty(interrupt_when="| typer", env={"PYTHONPROFILEIMPORTTIME": "1"})
    lines = plain(result.out).splitlines()
    said = [line.strip() for line in lines if line.strip() and "import time:" not in line]
    # A slow machine may get as far as the question before the key lands: same ending.
    assert said[-1] == "Cancelled.", result.out
    assert set(said[:-1]) <= {"What should Kestrel do?"}
    assert result.code == 130
    assert_clean(Result(result.code, "\n".join(said), ""))


def test_ctrl_c_while_a_command_runs_cancels_the_session(user: NewUser) -> None:
    model = script(user, SLEEP + CARRY_ON)
    result = user.run_tty(
        "sleep a while",
        "--model",
        model,
        "--allow",
        "Bash(sleep:*)",
        interrupt_when="allows sleep 30",
        env=WIDE,
    )
    session = session_id(result)
    lines = after(result, "allows sleep 30")
    assert lines[0] == f"Cancelled. Resume with: kestrel resume {session}"
    assert lines[1].startswith("── cancelled")
    assert len(lines) == 2, result.out
    assert result.code == 130
    assert_clean(result)
    assert status(user, session) == "cancelled"
    assert_resumes(user, session)


def test_ctrl_c_while_the_model_answers_cancels_the_session(user: NewUser) -> None:
    slow: list[object] = [
        {"tool_calls": [{"name": "list_files", "arguments": {}}]},
        {"text": "…", "delay_s": 30},
    ]
    result = user.run_tty(
        "look around",
        "--model",
        script(user, slow + CARRY_ON),
        interrupt_when="⎿ calc.py",
        env=WIDE,
    )
    session = session_id(result)
    assert after(result, "⎿ calc.py")[0] == f"Cancelled. Resume with: kestrel resume {session}"
    assert result.code == 130
    assert_clean(result)
    assert status(user, session) == "cancelled"


def test_ctrl_c_at_a_question_cancels_the_session(user: NewUser) -> None:
    ask: list[object] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > made.txt"}}]}
    ]
    model = script(user, ask + CARRY_ON)
    result = user.run_tty("make a file", "--model", model, interrupt_when="[a]lways", env=WIDE)
    session = session_id(result)
    assert after(result, "Allow bash?")[0] == f"Cancelled. Resume with: kestrel resume {session}"
    assert result.code == 130
    assert_clean(result)
    assert status(user, session) == "cancelled"
    assert not (user.project / "made.txt").exists()


def test_sigterm_settles_a_running_session_as_cancelled(user: NewUser) -> None:
    model = script(user, SLEEP + CARRY_ON)
    command = [*KESTREL, "-p", "sleep a while", "--model", model, "--allow", "Bash(sleep:*)"]
    proc = subprocess.Popen(
        [*command, "--output-format", "stream-json"],
        cwd=user.project,
        env=user.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    session = ""
    for line in proc.stdout:
        record = json.loads(line)
        session = record["session_id"]
        if record["event"]["type"] == "tool_started":
            proc.send_signal(signal.SIGTERM)  # As `kill PID`, a service manager or a CI timeout.
            break
    out, err = proc.communicate(timeout=60)
    result = Result(proc.returncode, out, err)
    assert result.first_line("err") == f"Stopped by SIGTERM. Resume with: kestrel resume {session}"
    assert result.code == 143
    assert_clean(result)
    finished = json.loads(out.splitlines()[-1])["event"]
    assert (finished["type"], finished["reason"]) == ("session_finished", "cancelled")
    assert finished["detail"] == "stopped by SIGTERM"
    assert status(user, session) == "cancelled"
    assert_resumes(user, session)


@pytest.fixture
def no_sandbox_slow_tests(tmp_path: Path) -> dict[str, str]:
    """A machine where the sandbox cannot start (its `bwrap` fails) and `python3` takes 30 s to
    begin, so the demo runs its tests unconfined and is caught in the middle of that command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text('#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n')
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\nsleep 30\nexec {shutil.which("python3")} "$@"\n')
    for program in (fake, python3):
        program.chmod(0o755)
    temp = tmp_path / "temp"
    temp.mkdir()
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(temp), **WIDE}


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_in_the_demo_removes_its_folder(
    user: NewUser, no_sandbox_slow_tests: dict[str, str], keep: bool
) -> None:
    marker = "allows python3 -m unittest"
    args = ["demo", "--keep"] if keep else ["demo"]
    result = user.run_tty(*args, interrupt_when=marker, env=no_sandbox_slow_tests)
    session = session_id(result)
    lines = after(result, marker)
    assert lines[0] == (
        f"Cancelled. Resume with: kestrel resume {session}" if keep else "Cancelled."
    )
    assert result.code == 130
    # Before the interrupt the demo shows its project's code, which raises a ValueError.
    assert_clean(Result(result.code, "\n".join(lines), ""))
    assert "Demo finished" not in result.out
    assert last_event(user, session)["reason"] == "cancelled"
    left = list(Path(no_sandbox_slow_tests["TMPDIR"]).glob("kestrel-demo-*"))
    assert len(left) == (1 if keep else 0)


def test_ctrl_c_while_the_demo_checks_the_sandbox(user: NewUser, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "bwrap"
    slow.write_text("#!/bin/sh\nsleep 30\n")  # A sandbox that takes its time to answer.
    slow.chmod(0o755)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(temp), **WIDE}
    result = user.run_tty("demo", interrupt_when="Task:", env=env)
    assert after(result, "Task:") == ["Cancelled."]
    assert result.code == 130
    assert_clean(result)
    assert not list(temp.iterdir())
    assert "session" not in plain(result.out)  # None had started.
