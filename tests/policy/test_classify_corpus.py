"""The classifier on two corpora, through the real permission gate: destructive commands of cloud,
cluster, container, database, disk, log, credential and git-metadata tools, written several ways
(options before and after, quoting, wrappers, pipes, `&&` chains), and their harmless look-alikes.

Every destructive command is asked about in `bypass`, `accept-edits` and `default`, by the
classifier, even under a rule that allows every command; every look-alike runs in `bypass`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kestrel.policy.classify import classify_shell
from kestrel.policy.gate import PermissionGate
from kestrel.policy.rules import RuleSet
from kestrel.policy.shell import parse_shell
from kestrel.policy.subject import CallSubject
from kestrel.protocol.events import PermissionMode

DATA = Path(__file__).parent / "data"
MODES: tuple[PermissionMode, ...] = ("bypass", "accept-edits", "default")


def _lines(name: str) -> list[str]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _dangerous() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []
    for line in _lines("classify_dangerous.txt"):
        if line.startswith("... "):
            command, reason = cases.pop()
            cases.append((f"{command}\n{line[4:]}", reason))
            continue
        reason, sep, command = line.partition(" :: ")
        assert sep, f"a line of classify_dangerous.txt lacks ' :: ': {line!r}"
        cases.append((command, reason))
    return cases


DANGEROUS = _dangerous()
HARMLESS = _lines("classify_harmless.txt")


def _gate(rules: dict[str, list[str]]) -> PermissionGate:
    return PermissionGate(rules=RuleSet.from_lists(rules), dirty=lambda: True)  # type: ignore[arg-type]


def _check(gate: PermissionGate, root: Path, command: str, mode: PermissionMode) -> tuple[str, str]:
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    decision = asyncio.run(gate.check(subject, mode))
    return decision.verdict, decision.decided_by


def test_the_corpora_are_large_and_distinct() -> None:
    commands = [c for c, _ in DANGEROUS]
    print(f"\nclassifier corpus: {len(commands)} destructive, {len(HARMLESS)} harmless look-alikes")
    assert len(commands) >= 150
    assert len(HARMLESS) >= 150
    assert len(set(commands)) == len(commands)
    assert len(set(HARMLESS)) == len(HARMLESS)
    assert not set(commands) & set(HARMLESS)


@pytest.mark.parametrize(("command", "reason"), DANGEROUS, ids=[c for c, _ in DANGEROUS])
def test_destructive_commands_are_asked_in_every_mode(
    tmp_path: Path, command: str, reason: str
) -> None:
    found = classify_shell(parse_shell(command), root=tmp_path, cwd=tmp_path, dirty=lambda: True)
    assert any(reason in d.reason for d in found), [d.reason for d in found]
    gate = _gate({"allow": ["Bash(*)"]})
    for mode in MODES:
        assert _check(gate, tmp_path, command, mode) == ("ask", "classifier"), mode


@pytest.mark.parametrize("command", HARMLESS)
def test_look_alikes_are_not_asked_and_run_in_bypass(tmp_path: Path, command: str) -> None:
    found = classify_shell(parse_shell(command), root=tmp_path, cwd=tmp_path, dirty=lambda: True)
    assert found == [], [d.reason for d in found]
    assert _check(_gate({"allow": []}), tmp_path, command, "bypass")[0] == "allow"


def test_counts_of_the_whole_corpus(tmp_path: Path) -> None:
    """One pass over both corpora, printing how many were asked, so a run shows the figures."""
    gate = _gate({"allow": []})
    asked = {mode: 0 for mode in MODES}
    for command, _ in DANGEROUS:
        for mode in MODES:
            asked[mode] += _check(gate, tmp_path, command, mode)[0] == "ask"
    allowed = sum(_check(gate, tmp_path, c, "bypass")[0] == "allow" for c in HARMLESS)
    summary = ", ".join(f"{mode} {n}/{len(DANGEROUS)}" for mode, n in asked.items())
    print(f"\ndestructive asked: {summary}; look-alikes run in bypass: {allowed}/{len(HARMLESS)}")
    assert all(n == len(DANGEROUS) for n in asked.values())
    assert allowed == len(HARMLESS)
