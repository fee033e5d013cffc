"""The interactive command in a real pseudo-terminal: questions, answers, follow-ups, Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time

from cli_kit import KESTREL, Env, lines_of

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A process on a pseudo-terminal that a test reads from and types into."""

    def __init__(self, env: Env, *args: str) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [*KESTREL, *args],
            env={**env.vars, "COLUMNS": "200"},
            cwd=env.project,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; screen so far:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    chunk = ""
                if not chunk:
                    assert text in self.seen, f"exited before {text!r}:\n{self.seen}"
                self.seen += ANSI.sub("", chunk).replace("\r", "")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=60)
        os.close(self.master)
        return code


def write_script(env: Env, turns: list[dict[str, object]]) -> None:
    env.script.write_text(json.dumps(turns))


BASH_THEN_DONE = [
    {
        "text": "Creating the file.",
        "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > made.txt"}}],
    },
    {"text": "All done."},
]


def test_asks_before_a_command_and_runs_it_when_allowed(env: Env) -> None:
    write_script(env, BASH_THEN_DONE)
    term = Terminal(env, "make a file", "--model", f"scripted:{env.script}")
    term.expect("Allow bash?")
    term.type("y")
    term.expect("All done.")
    term.expect("── done")
    term.type("")  # no follow-up: end the session
    term.expect("A made.txt")  # The change, made in the session's overlay, is shown ...
    assert not (env.project / "made.txt").exists()
    term.expect("Apply this change to your checkout?")  # ... and applied when the person agrees.
    term.type("y")
    term.expect("applied to the checkout: 1 written")
    assert term.close() == 0
    assert (env.project / "made.txt").read_text() == "hi\n"
    assert "● bash(command='echo hi > made.txt')" in term.seen


def test_a_refusal_reaches_the_model_and_nothing_runs(env: Env) -> None:
    write_script(env, BASH_THEN_DONE)
    term = Terminal(env, "make a file", "--model", f"scripted:{env.script}")
    term.expect("Allow bash?")
    term.type("n")
    term.expect("✗ denied")
    term.expect("── done")
    term.type("")
    assert term.close() == 0
    assert not (env.project / "made.txt").exists()
    (listed,) = json.loads(env.run("sessions", "list", "--json").stdout)
    events = [
        r["event"] for r in lines_of(env.run("sessions", "export", listed["session_id"]).stdout)
    ]
    (decision,) = [e for e in events if e["type"] == "permission_decided"]
    assert (decision["decision"], decision["decided_by"]) == ("deny", "user")
    (result,) = [e for e in events if e["type"] == "tool_finished"]
    assert result["is_error"] and "the user said no" in result["content"]


def test_a_follow_up_continues_the_same_session(env: Env) -> None:
    write_script(env, [{"text": "First answer."}, {"text": "Second answer."}])
    term = Terminal(env, "hello", "--model", f"scripted:{env.script}")
    term.expect("First answer.")
    term.expect("── done")
    term.type("and then?")
    term.expect("Second answer.")
    term.expect("2 turns")
    term.type("")
    assert term.close() == 0
    listed = json.loads(env.run("sessions", "list", "--json").stdout)
    assert len(listed) == 1 and listed[0]["status"] == "done"


def test_ctrl_c_cancels_cleanly_and_the_session_resumes(env: Env) -> None:
    write_script(
        env,
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
            {"text": "Carried on."},
        ],
    )
    proc = env.start(*env.headless("--output-format", "stream-json", "--allow", "Bash(sleep:*)"))
    assert proc.stdout is not None
    records = []
    for line in proc.stdout:
        records.append(json.loads(line))
        if records[-1]["event"]["type"] == "tool_started":
            proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    last = records[-1]["event"]
    assert last["type"] == "session_finished" and last["reason"] == "cancelled"
    interrupted = records[-2]["event"]
    assert interrupted["type"] == "tool_finished" and interrupted["interrupted"]
    resumed = env.run("resume", str(records[0]["session_id"]), "-p")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Carried on."


def test_ctrl_c_at_a_question_ends_at_once_and_is_recorded(env: Env) -> None:
    write_script(env, BASH_THEN_DONE)
    term = Terminal(env, "make a file", "--model", f"scripted:{env.script}")
    term.expect("Allow bash?")
    term.proc.send_signal(signal.SIGINT)  # Nobody presses Enter: the read must not hold exit.
    assert term.close() == 130
    assert not (env.project / "made.txt").exists()
    (listed,) = json.loads(env.run("sessions", "list", "--json").stdout)
    assert listed["status"] == "cancelled"
