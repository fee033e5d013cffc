"""A session killed with SIGKILL at any point resumes from its log and ends like an
uninterrupted one: same files, no completed step done twice."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from cli_kit import Env, fix_script, lines_of, types

KILL_POINTS = [1, 4, 9, 15, 22, 30, 38, 47, 55, 63]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], int]:
    env = Env(tmp_path_factory.mktemp("reference"))
    done = env.run(*env.headless("--output-format", "stream-json"))
    assert done.returncode == 0, done.stderr
    return env.files(), len(lines_of(done.stdout))


@pytest.mark.parametrize("kill_after", KILL_POINTS)
def test_sigkill_then_resume_ends_with_the_same_files(
    env: Env, reference: tuple[dict[str, str], int], kill_after: int
) -> None:
    files, total = reference
    assert kill_after < total
    proc = env.start(*env.headless("--output-format", "stream-json"))
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if len(seen) >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    session_id = str(seen[0]["session_id"])

    done = env.run("resume", session_id, "-p", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reason"] == "done"
    assert env.files() == files

    log = lines_of(env.run("sessions", "export", session_id).stdout)
    kinds = types(log)
    assert kinds.count("session_started") == 1 and kinds.count("session_resumed") == 1
    assert kinds.count("model_completed") == 7, "a completed model turn was redone"
    assert kinds.count("tool_call_requested") == 6, "a requested tool call was asked twice"
    assert kinds[-1] == "changes_applied"  # The run's change is applied once, at the very end.
    assert kinds.count("changes_applied") == 1
    assert "session_finished" in kinds[-4:]
    # Every event shown before the kill is still in the log, unchanged.
    assert log[: len(seen)] == seen
    edits = [
        r
        for r in log
        if r["event"]["type"] == "tool_finished"  # type: ignore[index]
        and r["event"]["name"] == "edit_file"
    ]  # type: ignore[index]
    assert len(edits) == 1


def test_resume_of_an_unknown_session_is_a_usage_error(env: Env) -> None:
    done = env.run("resume", "doesnotexist", "-p")
    assert done.returncode == 2 and "doesnotexist" in done.stderr


def test_continue_picks_the_latest_session_in_this_directory(env: Env) -> None:
    first = env.run(*env.headless("--max-turns", "2", "--output-format", "json"))
    assert first.returncode == 3
    session_id = json.loads(first.stdout)["session_id"]
    again = env.run("-p", "--continue", "--max-turns", "50", "--output-format", "json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["session_id"] == session_id and result["reason"] == "done"
    assert "return a + b" in (env.project / "calc.py").read_text()


def test_a_finished_session_takes_a_follow_up(env: Env, tmp_path: Path) -> None:
    first = json.loads(env.run(*env.headless("--output-format", "json")).stdout)
    nothing = env.run("resume", first["session_id"], "-p")
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stderr.startswith(f"Session {first['session_id']} is finished.")
    assert nothing.stdout == ""
    env.script.write_text(json.dumps([*fix_script(), {"text": "You are welcome."}]))
    follow = env.run("resume", first["session_id"], "thanks", "-p", "--output-format", "json")
    assert follow.returncode == 0, follow.stderr
    assert json.loads(follow.stdout)["final_text"] == "You are welcome."
