"""The permission gate on a corpus of real and hostile commands under real rule sets.

`data/rules_corpus.jsonl` opens with named rule sets (`{"ruleset": ..., "allow": [...]}`) and
then lists cases: a command, the rule set it runs under, the modes to try, the decision
expected, and its group. `must-not-allow` commands write outside the workspace, run code through
an option an allow rule did not name, or cannot be read with certainty: none may be allowed in
any of its modes. `should-allow` commands are ordinary commands under ordinary rules: every one
must still be allowed. The commands use `/testbed` for the workspace, as the recorded sessions
they come from did.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kestrel.policy.gate import PermissionGate
from kestrel.policy.rules import RuleSet
from kestrel.policy.subject import CallSubject

CORPUS = Path(__file__).parent / "data" / "rules_corpus.jsonl"


def _load() -> tuple[dict[str, dict[str, list[str]]], list[dict[str, Any]]]:
    rulesets: dict[str, dict[str, list[str]]] = {}
    cases: list[dict[str, Any]] = []
    for line in CORPUS.read_text().splitlines():
        item = json.loads(line)
        if "ruleset" in item:
            rulesets[item.pop("ruleset")] = item
        else:
            cases.append(item)
    return rulesets, cases


RULESETS, CASES = _load()


async def _decide(case: dict[str, Any], mode: str, root: Path, home: Path) -> tuple[str, str]:
    rules = RuleSet.from_lists(RULESETS[case["rules"]], home=home)  # type: ignore[arg-type]
    gate = PermissionGate(rules=rules, dirty=lambda: False)
    command = case["command"].replace("/testbed", str(root))
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    decision = await gate.check(subject, mode)  # type: ignore[arg-type]
    return decision.verdict, decision.reason


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("corpus")
    root, home = base / "work", base / "home"
    for folder in (root / "src", root / "notes", root / "build", home):
        folder.mkdir(parents=True)
    return root, home


def test_the_corpus_is_big_enough_and_well_formed() -> None:
    groups = Counter(case["group"] for case in CASES)
    print(f"\nrules corpus: {len(CASES)} commands, {dict(groups)}")
    assert len(CASES) >= 300
    assert groups["should-allow"] >= 50
    assert all(case["rules"] in RULESETS for case in CASES)
    for lists in RULESETS.values():
        RuleSet.from_lists(lists)  # type: ignore[arg-type]  # every rule parses


def test_no_must_not_allow_command_is_allowed_in_any_mode(places: tuple[Path, Path]) -> None:
    root, home = places
    allowed, tried = [], 0
    for case in (c for c in CASES if c["group"] == "must-not-allow"):
        for mode in case["modes"]:
            tried += 1
            verdict, reason = asyncio.run(_decide(case, mode, root, home))
            if verdict == "allow":
                allowed.append(f"{mode}: {case['command']!r} ({case['why']}) -> {reason}")
    print(f"\nmust-not-allow: {tried} decisions, {len(allowed)} allowed")
    assert allowed == []


def test_every_should_allow_command_is_still_allowed(places: tuple[Path, Path]) -> None:
    root, home = places
    refused = []
    cases = [c for c in CASES if c["group"] == "should-allow"]
    for case in cases:
        verdict, reason = asyncio.run(_decide(case, "default", root, home))
        if verdict != "allow":
            refused.append(f"{case['command']!r} -> {verdict}: {reason}")
    print(f"\nshould-allow: {len(cases) - len(refused)} of {len(cases)} allowed")
    assert refused == []


def test_each_case_gets_the_decision_it_expects(places: tuple[Path, Path]) -> None:
    root, home = places
    wrong = []
    for case in CASES:
        verdict, reason = asyncio.run(_decide(case, case["modes"][0], root, home))
        if verdict != case["expect"]:
            wrong.append(f"{case['command']!r}: {verdict}, expected {case['expect']} ({reason})")
    assert wrong == []
