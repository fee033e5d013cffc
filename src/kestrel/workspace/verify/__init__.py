"""Verification after edits: pick the checks a change needs, run them, and read their output into
structured failures the model can act on.

    checks = detect_checks(root, ["src/app/calc.py"])
    report = await Verifier(executor, root).run(checks)
    print(report.render())

    gate = security_gate(root, ["src/app/calc.py"], baseline=baseline)
    print(gate.blocking)  # secrets and high-severity findings on the lines the change added
"""

from kestrel.workspace.verify.detect import Check, Which, detect_checks, normalize_paths
from kestrel.workspace.verify.failures import (
    CheckResult,
    CheckStatus,
    Failure,
    FailureKind,
    Parsed,
    VerificationReport,
)
from kestrel.workspace.verify.parsers import PARSERS, OutputParser, ParserName, parse_output
from kestrel.workspace.verify.project import DiskFiles, MemoryFiles, ProjectFiles
from kestrel.workspace.verify.related import RelatedTests, related_test_tiers, related_tests
from kestrel.workspace.verify.runner import Verifier, judge
from kestrel.workspace.verify.security import GateReport, gate_change_set, security_gate
from kestrel.workspace.verify.syntax import syntax_failures

__all__ = [
    "PARSERS",
    "Check",
    "CheckResult",
    "CheckStatus",
    "DiskFiles",
    "Failure",
    "FailureKind",
    "GateReport",
    "MemoryFiles",
    "OutputParser",
    "Parsed",
    "ParserName",
    "ProjectFiles",
    "RelatedTests",
    "VerificationReport",
    "Verifier",
    "Which",
    "detect_checks",
    "gate_change_set",
    "judge",
    "normalize_paths",
    "parse_output",
    "related_test_tiers",
    "related_tests",
    "security_gate",
    "syntax_failures",
]
