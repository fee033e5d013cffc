"""A module pytest could not find: the project's own (the change deleted or misnamed it), which
the model must fix, or one missing from the environment, which it cannot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from kestrel.workspace.verify.failures import CheckResult, Failure, VerificationReport
from kestrel.workspace.verify.parsers_pytest import MISSING_MODULE
from kestrel.workspace.verify.project import DiskFiles
from kestrel.workspace.verify.related import module_names

_SOURCE_ROOTS = ("", "src/", "lib/")
_EXTENSION_SOURCES = (".pyx", ".c", ".cpp", ".rs")
"""Sources of a compiled module: one missing with only these beside it is not built here."""


def own_missing_modules(
    report: VerificationReport, root: Path, changed: Sequence[str]
) -> VerificationReport:
    """`report` with each missing module that is the project's made a test failure: a module
    named after a changed (or deleted) path, or one whose top package lies in `root` (except an
    extension module with only its sources there: the environment has not compiled it)."""
    files = DiskFiles(root)
    changed_names = {name for path in changed for name in module_names(path, files)}

    def own(name: str) -> bool:
        parts = name.split(".")
        if any(".".join(parts[:n]) in changed_names for n in range(1, len(parts) + 1)):
            return True
        if unbuilt(parts):
            return False  # An extension module the environment has not compiled.
        top = parts[0]
        return any(
            (root / f"{base}{top}").is_dir() or (root / f"{base}{top}.py").is_file()
            for base in _SOURCE_ROOTS
        )

    def unbuilt(parts: list[str]) -> bool:
        for base in _SOURCE_ROOTS:
            stem = root / base / "/".join(parts)
            if stem.with_suffix(".py").is_file() or stem.is_dir():
                return False
            if any(stem.with_suffix(suffix).is_file() for suffix in _EXTENSION_SOURCES):
                return True
        return False

    def judged(failure: Failure) -> Failure:
        match = MISSING_MODULE.search(failure.message) if failure.kind == "error" else None
        if failure.tool != "pytest" or match is None or not own(match.group(1)):
            return failure
        return replace(failure, kind="test")

    def check(result: CheckResult) -> CheckResult:
        failures = tuple(judged(failure) for failure in result.failures)
        return result if failures == result.failures else replace(result, failures=failures)

    return VerificationReport(tuple(check(result) for result in report.checks))
