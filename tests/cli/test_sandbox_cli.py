"""The sandbox from the command line: doctor, `sandbox run`, and a session with --sandbox bwrap."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_kit import Env, lines_of

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="bubblewrap is not installed (CI installs it, and there this test must run)",
)

# The interpreter itself, not a venv's link to it: a checkout under /tmp is hidden inside.
PYTHON = os.path.realpath(sys.executable)


@needs_bwrap
def test_doctor_passes_where_bubblewrap_works(env: Env) -> None:
    done = env.run("doctor", "--model", f"scripted:{env.script}")
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
    command = f"echo x > {outside}; echo ok > inside.txt"
    env.script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
                {"text": "tried"},
            ]
        )
    )
    # An exact rule lets the command past the permission gate; the sandbox must still hold.
    args = ["--sandbox", "bwrap", "--allow", f"Bash({command})", "--output-format", "stream-json"]
    done = env.run(*env.headless(*args))
    assert done.returncode == 0, done.stderr
    assert not outside.exists()
    assert (env.project / "inside.txt").read_text() == "ok\n"
    # The write went to the sandbox's private /tmp (or failed): either way the host is untouched.
    started = [r["event"] for r in lines_of(done.stdout) if r["event"]["type"] == "tool_started"]
    assert len(started) == 1


def test_without_a_working_sandbox_a_session_is_refused_with_the_fix(
    env: Env, tmp_path: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env.vars["PATH"] = str(empty)  # No bubblewrap to be found.
    env.vars.pop("KESTREL_SANDBOX", None)  # The default: the sandbox.
    done = env.run(*env.headless())
    assert done.returncode == 2
    assert "sandbox cannot start" in done.stderr and "--sandbox none" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr
    assert env.run("sessions", "list", "--json").stdout.strip() == "[]"  # Nothing was started.
    unconfined = env.run(*env.headless("--sandbox", "none"))
    assert unconfined.returncode == 0, unconfined.stderr


@needs_bwrap
def test_sandbox_run_with_an_allow_list_refuses_other_hosts(env: Env) -> None:
    code = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/', timeout=5)"
    done = env.run(
        "sandbox",
        "run",
        "--network",
        "allowlist",
        "--allow-host",
        "pypi.org",
        "--",
        f'{PYTHON} -c "{code}"',
    )
    assert done.returncode != 0
    assert "allow-list refused: 127.0.0.1" in done.stdout + done.stderr
    missing = env.run("sandbox", "run", "--network", "allowlist", "--", "true")
    assert missing.returncode == 2 and "--allow-host" in missing.stderr
