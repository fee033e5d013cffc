"""Substitutions in a heredoc body: data for the command fed, judged by the commands they run.

Real sessions rebuild files this way (`cat <<EOF > f.new` with `$(head -n 543 f)` in the body).
Under `BashHeredoc(cat)` and `Bash(head:*)` that runs unasked; every other place a substitution
can decide what runs or where it writes is still asked about.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kestrel.policy.gate import PermissionGate
from kestrel.policy.heredoc_body import substitutions_only
from kestrel.policy.rules import RuleSet
from kestrel.policy.subject import CallSubject
from kestrel.protocol.events import PermissionMode

RULES = ["Bash(head:*)", "BashHeredoc(cat)", "Bash(echo:*)", "Bash(git:*)", "Bash(cat:*)"]
ALLOWED = [
    "cat <<EOF > a.py\n$(head -n 5 b.py)\n    def more(self):\n        pass\nEOF",
    "cat <<EOF > a.py\n$(head -n 5 b.py)\n$(head -n 2 c.py)\nEOF",
]
ASKED = {
    "cat <<EOF > a.py\n$(rm -rf ~)\nEOF": "deletes",
    "cat <<EOF > a.py\n$(head x)\nEOF\ngit $(echo push)": "command substitution",
    "cat <<EOF > $(echo a)\n$(head x)\nEOF": "command substitution",
    "cat <<EOF > a\n$(head $(echo x))\nEOF": "command substitution",
    "cat <<EOF > a\n$HOME $(head x)\nEOF": "a heredoc",
    "cat <<EOF > a\n`head x`\nEOF": "a heredoc",
    "cat <<EOF > a\n$(python -c 'import os')\nEOF": "command substitution",
    "cat <<EOF > a\n$(head x) $((1+2))\nEOF": "a heredoc",
    "cat <<EOF > a\n$(head x)\nEOF\necho $(head y)": "command substitution",
    "cat <<EOF > ../outside\n$(head x)\nEOF": "outside the workspace",
    "X=$(head x) cat <<EOF > a\n$(head x)\nEOF": "command substitution",
    "cat <<EOF > a\n$(head x <(echo y))\nEOF": "",
}
MODES: tuple[PermissionMode, ...] = ("default", "accept-edits")


def _verdict(root: Path, command: str, mode: PermissionMode) -> tuple[str, str]:
    gate = PermissionGate(rules=RuleSet.from_lists({"allow": RULES}), dirty=lambda: False)
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    decision = asyncio.run(gate.check(subject, mode))
    return decision.verdict, decision.reason


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("command", ALLOWED)
def test_body_substitutions_of_allowed_commands_run(
    tmp_path: Path, command: str, mode: PermissionMode
) -> None:
    verdict, reason = _verdict(tmp_path, command, mode)
    assert verdict == "allow", reason


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("command", "why"), list(ASKED.items()))
def test_every_other_substitution_is_still_asked(
    tmp_path: Path, command: str, why: str, mode: PermissionMode
) -> None:
    verdict, reason = _verdict(tmp_path, command, mode)
    assert verdict == "ask"
    assert why in reason


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("$(head x)\n", True),
        ("text $(head x) more\n", True),
        ("plain\n", False),
        ("$HOME\n", False),
        ("${x}\n", False),
        ("$((1))\n", False),
        ("`x`\n", False),
        ("\\$(x)\n", False),
        ("$(x) $\n", False),
    ],
)
def test_only_command_substitutions_count(body: str, expected: bool) -> None:
    assert substitutions_only(body) is expected
