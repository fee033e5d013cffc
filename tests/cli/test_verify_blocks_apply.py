"""A change whose verification failed is never applied on its own, whatever the model says last:
a reply with no edits after a failed check does not count as a fix."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_kit import BUGGY, Env, lines_of
from no_usage_server import NoUsageServer, Turn

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="checks run on their own only inside the sandbox"
)


@pytest.fixture(autouse=True)
def _checks_find_an_interpreter_the_sandbox_sees(env: Env) -> None:
    """The project's tests run in the sandbox with the first `python3` on PATH. Kestrel's own
    virtualenv comes first there when `scripts/test` put it on PATH, and from a clone under /tmp
    the sandbox cannot see it (its /tmp is private), so the check could not even start. These
    tests are about what a failed check does, so they leave that virtualenv off PATH."""
    own = str(Path(sys.prefix) / "bin")
    entries = env.vars.get("PATH", "").split(os.pathsep)
    env.vars["PATH"] = os.pathsep.join(e for e in entries if e and e != own)


WRONG_FIX = {
    "tool_calls": [
        {
            "name": "edit_file",
            "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a * b"},
        }
    ]
}


def _events(output: str) -> list[dict[str, object]]:
    return [record["event"] for record in lines_of(output)]  # type: ignore[misc]


@pytest.mark.parametrize("last", ["", "All fixed.", "   "])
def test_a_failed_verification_stops_the_auto_apply(env: Env, last: str) -> None:
    # The edit leaves the tests failing; every later reply claims to be done without editing.
    script = [WRONG_FIX, {"text": "Done."}, {"text": last}, {"text": last}, {"text": last}]
    env.script.write_text(json.dumps(script))

    done = env.run(*env.headless("--output-format", "stream-json"))

    events = _events(done.stdout)
    verifications = [e for e in events if e["type"] == "verification_finished"]
    assert verifications, done.stderr
    assert all(v["blocking"] and not v["ok"] for v in verifications), verifications
    [finished] = [e for e in events if e["type"] == "session_finished"]
    assert finished["reason"] == "unverified", finished
    assert done.returncode != 0
    applied = [e for e in events if e["type"] == "changes_applied"]
    assert not any(e["outcome"] == "applied" for e in applied)
    assert (env.project / "calc.py").read_text() == BUGGY


def test_a_fixed_change_is_applied(env: Env) -> None:
    # The same run, but the model fixes the change after the failed check: it is applied.
    fix = {
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {"path": "calc.py", "old_str": "a * b", "new_str": "a + b"},
            }
        ]
    }
    env.script.write_text(json.dumps([WRONG_FIX, {"text": "Done."}, fix, {"text": "Fixed."}]))

    done = env.run(*env.headless("--output-format", "stream-json"))

    assert done.returncode == 0, done.stderr
    events = _events(done.stdout)
    verifications = [v for v in events if v["type"] == "verification_finished"]
    assert [v["ok"] for v in verifications] == [False, True], verifications
    assert events[-1]["type"] == "changes_applied" and events[-1]["outcome"] == "applied"
    assert "return a + b" in (env.project / "calc.py").read_text()


def test_an_empty_reply_from_a_real_server_after_a_failed_check_applies_nothing(env: Env) -> None:
    # Over the OpenAI wire an empty reply is an error that ends the session: nothing is applied.
    edit = {
        "tool": "edit_file",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a * b"},
    }
    replies: list[Turn] = [edit, {"text": "Done."}]
    with NoUsageServer(lambda n: replies[n] if n < len(replies) else {"text": ""}) as server:
        env.vars["KESTREL_BASE_URL"] = server.url
        done = env.run(
            *("-p", "fix the tests", "--model", "openai:my-local-model"),
            *("--permission-mode", "accept-edits", "--output-format", "stream-json"),
        )

    events = _events(done.stdout)
    [verification] = [e for e in events if e["type"] == "verification_finished"]
    assert verification["blocking"] and not verification["ok"]
    [finished] = [e for e in events if e["type"] == "session_finished"]
    assert finished["reason"] == "error" and "EmptyReply" in str(finished["detail"]), finished
    assert done.returncode != 0
    assert not any(e["type"] == "changes_applied" and e["outcome"] == "applied" for e in events)
    assert (env.project / "calc.py").read_text() == BUGGY
