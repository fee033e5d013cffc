"""Writes to /tmp and /var/tmp: inside the sandbox each command has its own, so they stay in.

Agents write scratch scripts there all the time (`cat > /tmp/reproduce.py <<'EOF'`). Sandboxed,
such a write lands in the session's private /tmp and is not a write outside the workspace;
unconfined, it reaches the host's /tmp and is asked about like any other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kestrel.policy.gate import GateDecision, PermissionGate
from kestrel.policy.rules import RuleSet
from kestrel.policy.subject import CallSubject
from kestrel.protocol.events import PermissionMode

WORKSPACE = Path("/srv/kestrel-test-project")
"""A workspace outside /tmp (the gate only reasons about paths; nothing is written)."""

SCRATCH = [
    "cat > /tmp/reproduce.py <<'EOF'\nprint('hi')\nEOF",
    "echo data > /var/tmp/out.txt",
    "mkdir -p /tmp/work && cd /tmp/work && echo x > a.txt",
    "python -c 'print(1)' > $TMPDIR/log.txt 2>&1",
]
STILL_OUTSIDE = [
    "echo x > /tmp/../etc/profile.d/x.sh",
    "echo x > ~/.bashrc",
    "cd /tmp && echo x > ../etc/cron.d/job",
    "echo x > /srv/other-project/file",
]


def _decide(command: str, *, sandboxed: bool, root: Path = WORKSPACE) -> GateDecision:
    gate = PermissionGate(rules=RuleSet.from_lists({}), dirty=lambda: True, sandboxed=sandboxed)
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    mode: PermissionMode = "bypass"
    return asyncio.run(gate.check(subject, mode))


@pytest.mark.parametrize("command", SCRATCH)
def test_a_sandboxed_scratch_write_is_not_asked(command: str) -> None:
    decision = _decide(command, sandboxed=True)
    assert decision.verdict == "allow", decision.reason


@pytest.mark.parametrize("command", SCRATCH)
def test_an_unconfined_scratch_write_is_asked(command: str) -> None:
    decision = _decide(command, sandboxed=False)
    assert decision.verdict == "ask"


@pytest.mark.parametrize("command", STILL_OUTSIDE)
def test_a_write_beyond_the_private_folders_is_still_asked(command: str) -> None:
    decision = _decide(command, sandboxed=True)
    assert decision.verdict == "ask"
    assert "outside the workspace" in decision.reason


def test_next_to_a_workspace_under_tmp_a_tmp_write_is_asked() -> None:
    root = Path("/tmp/project/ws")
    decision = _decide("echo x > /tmp/project/other.txt", sandboxed=True, root=root)
    assert decision.verdict == "ask"
    assert "outside the workspace" in decision.reason
