"""Without a sandbox Kestrel does not run a project's checks on its own, and it says so: in the
run, where the verification would be, and in the summary at the end, with the reason."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from kit import NewUser, Result, assert_clean

from kestrel.sandbox.probe import probe

ANSI = re.compile(r"\x1b\[[0-9;]*m")
WIDE = {"COLUMNS": "200"}
CANNOT_START = "not verified: the sandbox cannot start here (run `kestrel doctor`)"
SANDBOX_OFF = "not verified: this session runs without the sandbox (sandbox = none)"
FIX = [
    {
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
            }
        ]
    },
    {"text": "Fixed: add adds."},
]


@pytest.fixture
def tested(user: NewUser) -> NewUser:
    """The new user's project with a test of `calc.py`, so a change to it calls for pytest."""
    (user.project / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    git = ["git", "-C", str(user.project)]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run(
        [*git, "-c", "user.name=n", "-c", "user.email=n@x", "commit", "-qm", "tests"], check=True
    )
    script = user.project.parent / "script.json"
    script.write_text(json.dumps(FIX))
    return user


@pytest.fixture
def broken_sandbox(tmp_path: Path) -> dict[str, str]:
    """An environment where bubblewrap is found but cannot start, as on a locked-down host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text('#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n')
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", **WIDE}


def lines_of(result: Result) -> list[str]:
    """What the terminal showed, line by line, without colour."""
    return [line.strip() for line in ANSI.sub("", result.out).splitlines() if line.strip()]


def run_fix(user: NewUser, env: dict[str, str]) -> Result:
    """The scripted fix at a terminal, edits allowed, commands unconfined."""
    model = f"scripted:{user.project.parent / 'script.json'}"
    args = ["fix add", "--model", model, "--sandbox", "none", "--permission-mode", "accept-edits"]
    return user.run_tty(*args, keys=[("── done", "\n")], env=env)


def assert_said_not_verified(result: Result, statement: str) -> None:
    """The statement stands where the verification is shown and again just before the footer."""
    lines = lines_of(result)
    assert f"✗ {statement}" in lines, result.out
    assert "pytest: skipped" in "\n".join(lines)
    footer = next(i for i, line in enumerate(lines) if line.startswith("── done"))
    assert lines[footer - 1] == f"⚠ {statement}"
    assert "verification passed" not in result.out
    assert result.code == 0
    assert_clean(result)


def test_a_sandbox_that_cannot_start_is_named_as_the_reason(
    tested: NewUser, broken_sandbox: dict[str, str]
) -> None:
    result = run_fix(tested, broken_sandbox)
    assert_said_not_verified(result, CANNOT_START)


def test_sandbox_none_says_the_change_was_not_verified(tested: NewUser) -> None:
    works = asyncio.run(probe()).ok
    result = run_fix(tested, WIDE)
    assert_said_not_verified(result, SANDBOX_OFF if works else CANNOT_START)


def headless_fix(user: NewUser, env: dict[str, str], *extra: str) -> Result:
    """The scripted fix with `-p`: edits allowed, commands unconfined, nobody asked."""
    model = f"scripted:{user.project.parent / 'script.json'}"
    mode = ["--permission-mode", "accept-edits"]
    return user.run("-p", "fix add", "--model", model, "--sandbox", "none", *mode, *extra, env=env)


def test_headless_text_says_it_on_stderr(tested: NewUser, broken_sandbox: dict[str, str]) -> None:
    result = headless_fix(tested, broken_sandbox)
    assert (result.code, result.out.strip()) == (0, "Fixed: add adds.")
    # After the lines about the change handed over (applied here: edits were allowed).
    assert result.err.splitlines()[-1] == f"kestrel: {CANNOT_START}"
    assert_clean(result)


def test_headless_json_says_it_in_the_result(
    tested: NewUser, broken_sandbox: dict[str, str]
) -> None:
    result = headless_fix(tested, broken_sandbox, "--output-format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["not_verified"] == CANNOT_START


def test_the_demo_says_it_did_not_verify_the_change(
    user: NewUser, broken_sandbox: dict[str, str]
) -> None:
    result = user.run_tty("demo", env=broken_sandbox)
    lines = lines_of(result)
    assert any(
        line.startswith("The sandbox cannot start here (see `kestrel doctor`)") for line in lines
    )
    (verdict,) = [line for line in lines if line.startswith("Demo finished")]
    assert verdict.startswith(
        "Demo finished (done); the tests pass; Kestrel did NOT verify the change: "
        "the sandbox cannot start here (run `kestrel doctor`)."
    )
    assert f"⚠ {CANNOT_START}" in lines
    assert result.code == 0
