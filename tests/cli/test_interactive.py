"""The interactive command in a real pseudo-terminal: questions, answers, follow-ups, Ctrl-C."""

from __future__ import annotations

import json
import signal

from cli_kit import Env, Terminal, lines_of


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
    term.expect("Allow bash? [y]es / [n]o / [a]lways for this session")  # the keys are shown
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
