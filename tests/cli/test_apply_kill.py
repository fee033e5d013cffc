"""A killed `kestrel apply` is finished or undone by the very next command, whatever it is;
two applies of one session at once give one apply, one clear message and one event."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from apply_kill_kit import (
    HOOK,
    applied_events,
    apply_with_hook,
    leftovers,
    pending_session,
    state,
    trial,
)
from cli_kit import BUGGY, KESTREL, Env

NOTES = 4


@pytest.mark.parametrize(
    ("step", "git"),
    [("journaled", False), ("op:2", True), ("op:4", False), ("done", True), ("cleanup", False)],
)
def test_the_next_command_finishes_a_killed_apply(env: Env, step: str, git: bool) -> None:
    result = trial(env, NOTES, step, git)
    assert result.killed
    if step.startswith("op:"):
        assert result.after_kill == "mixed"  # the kill really cut the apply in half
    assert result.after_repair == "new"  # `kestrel sessions list` finished it
    assert result.events_after_repair == 1
    assert result.final == "new" and result.events_final == 1
    assert "already applied" in result.repair_output
    assert "Traceback" not in result.repair_output
    assert not result.leftovers


def test_an_apply_killed_before_its_journal_leaves_the_change_waiting(env: Env) -> None:
    session_id = pending_session(env, NOTES)
    killed = apply_with_hook(env, session_id, "kill:staged")
    assert killed.returncode == -9
    assert state(env, NOTES) == "old"
    shown = env.run("diff", session_id, "--stat")
    assert shown.returncode == 0, shown.stderr
    assert "5 files" in shown.stdout and "Traceback" not in shown.stderr
    assert applied_events(env, session_id) == 0
    applied = env.run("apply", session_id)
    assert applied.returncode == 0, applied.stderr
    assert state(env, NOTES) == "new" and applied_events(env, session_id) == 1


def test_kestrel_diff_repairs_a_killed_apply(env: Env) -> None:
    session_id = pending_session(env, NOTES)
    apply_with_hook(env, session_id, "kill:op:1")
    assert state(env, NOTES) == "mixed"
    shown = env.run("diff", session_id)
    assert shown.returncode == 0, shown.stderr
    assert state(env, NOTES) == "new"
    assert "no change waiting" in shown.stdout
    assert applied_events(env, session_id) == 1


def _held_apply(env: Env, session_id: str, gate: Path) -> subprocess.Popen[str]:
    """Start `kestrel apply`, which stops with half its files written until `gate` is gone."""
    first = subprocess.Popen(
        [*KESTREL, "apply", session_id],
        env={**env.vars, HOOK: f"hold:op:2@{gate}"},
        cwd=env.project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not gate.exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first apply never reached its hold point"
        time.sleep(0.05)
    return first


def test_a_second_apply_while_the_first_runs_says_so(env: Env, tmp_path: Path) -> None:
    session_id = pending_session(env, NOTES)
    gate = tmp_path / "gate"
    first = _held_apply(env, session_id, gate)
    second = env.run("apply", session_id)  # gives up after its short wait
    assert second.returncode == 2
    assert "another kestrel process is applying" in second.stderr
    assert "Traceback" not in second.stderr and "unmount" not in second.stderr
    listed = env.run("sessions", "list")  # a live apply is left alone
    assert listed.returncode == 0 and state(env, NOTES) == "mixed"
    gate.unlink()
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert state(env, NOTES) == "new"
    third = env.run("apply", session_id)
    assert third.returncode == 0 and "already applied" in third.stderr
    assert applied_events(env, session_id) == 1


def test_a_second_apply_that_waits_finds_the_change_applied(env: Env, tmp_path: Path) -> None:
    session_id = pending_session(env, NOTES)
    gate = tmp_path / "gate"
    first = _held_apply(env, session_id, gate)
    second = env.start("apply", session_id)
    gate.unlink()
    _, first_err = first.communicate(timeout=60)
    _, second_err = second.communicate(timeout=60)
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second_err
    assert "already applied" in second_err and "Traceback" not in second_err
    assert state(env, NOTES) == "new"
    assert applied_events(env, session_id) == 1


def test_a_session_whose_change_conflicts_exits_1(env: Env) -> None:
    session_id = pending_session(env, NOTES)
    (env.project / "calc.py").write_text(BUGGY.replace("return a - b", "return b + a"))
    handed = env.run("resume", session_id, "-p", "--permission-mode", "accept-edits")
    assert handed.returncode == 1, handed.stderr
    assert "conflicts with your edits; nothing was applied" in handed.stderr
    assert not leftovers(env) and state(env, NOTES) == "old"  # nothing of the session's
    assert "return b + a" in (env.project / "calc.py").read_text()  # the person's edit stays
