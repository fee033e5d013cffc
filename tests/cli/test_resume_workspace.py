"""A resume works where the session's changes went: the mode it started in is in its log."""

from __future__ import annotations

import json
import signal

from cli_kit import Env, lines_of


def kill_after_first_tool(env: Env, *extra: str) -> str:
    """Start a headless run, SIGKILL it once a tool has finished; the session's id."""
    proc = env.start(*env.headless("--output-format", "stream-json", *extra))
    assert proc.stdout is not None and proc.stderr is not None
    session_id = ""
    for line in proc.stdout:
        record = json.loads(line)
        session_id = session_id or str(record["session_id"])
        if record["event"]["type"] == "tool_finished":
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    proc.stdout.close()
    proc.stderr.close()
    return session_id


def test_a_direct_session_resumes_direct_without_the_flag(env: Env) -> None:
    session_id = kill_after_first_tool(env, "--workspace", "direct")
    log = lines_of(env.run("sessions", "export", session_id).stdout)
    assert log[0]["event"]["workspace"] == "direct"

    done = env.run("resume", session_id, "-p", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reason"] == "done"
    kinds = [r["event"]["type"] for r in lines_of(env.run("sessions", "export", session_id).stdout)]
    # Direct: the change is in the checkout already, nothing is handed over or applied.
    assert "changes_ready" not in kinds and "changes_applied" not in kinds
    assert "return a + b" in (env.project / "calc.py").read_text()


def test_a_resume_that_names_the_other_workspace_is_refused(env: Env) -> None:
    session_id = kill_after_first_tool(env, "--workspace", "direct")
    before = env.run("sessions", "export", session_id).stdout
    refused = env.run("resume", session_id, "-p", "--workspace", "overlay")
    assert refused.returncode == 2, refused.stderr
    assert "works in the direct workspace" in refused.stderr
    assert "--workspace overlay" in refused.stderr and "Traceback" not in refused.stderr
    assert env.run("sessions", "export", session_id).stdout == before  # Nothing was logged.
