"""The sandbox from the command line: doctor, `sandbox run`, and a session with --sandbox bwrap."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_kit import Env, lines_of

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="bubblewrap is not installed (CI installs it, and there this test must run)",
)


@needs_bwrap
def test_doctor_passes_where_bubblewrap_works(env: Env) -> None:
    done = env.run("doctor")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_bwrap
def test_sandbox_run_confines_a_command(env: Env, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    done = env.run(
        "sandbox",
        "run",
        "--workspace",
        str(env.project),
        "--",
        f"echo inside > in.txt; echo x > {outside}; echo done",
    )
    assert "done" in done.stdout
    assert (env.project / "in.txt").read_text() == "inside\n"
    assert not outside.exists()


@needs_bwrap
def test_a_session_in_the_sandbox_cannot_write_outside_its_workspace(
    env: Env, tmp_path: Path
) -> None:
    outside = tmp_path / "escaped.txt"
    env.script.write_text(
        json.dumps(
            [
                {
                    "tool_calls": [
                        {
                            "name": "bash",
                            "arguments": {"command": f"echo x > {outside}; echo ok > inside.txt"},
                        }
                    ]
                },
                {"text": "tried"},
            ]
        )
    )
    done = env.run(*env.headless("--sandbox", "bwrap", "--output-format", "stream-json"))
    assert done.returncode == 0, done.stderr
    assert not outside.exists()
    assert (env.project / "inside.txt").read_text() == "ok\n"
    # The write went to the sandbox's private /tmp (or failed): either way the host is untouched.
    started = [r["event"] for r in lines_of(done.stdout) if r["event"]["type"] == "tool_started"]
    assert len(started) == 1
