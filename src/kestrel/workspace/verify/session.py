"""Verification as a session runs it: pick the checks for the changed files, run them in the
workspace through the command executor, and report a `verification_finished` event."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from kestrel.protocol.events import CheckOutcome, VerificationFinished, VerifyFailure
from kestrel.workspace.verify.detect import Which, detect_checks
from kestrel.workspace.verify.failures import VerificationReport
from kestrel.workspace.verify.runner import CommandExecutor, Verifier

FIXABLE = frozenset({"test", "lint", "type", "syntax", "build"})
"""Failure kinds the model can act on; an `error` (a tool missing or crashing) is only shown."""
MAX_FAILURES_IN_EVENT = 100


class SessionVerifier:
    """Checks a session's changed files in its workspace (the agent loop's `Verifier`)."""

    def __init__(
        self,
        executor: CommandExecutor,
        root: Path,
        *,
        timeout_s: float = 300.0,
        which: Which = shutil.which,
    ) -> None:
        self._executor = executor
        self._root = root
        self._timeout_s = timeout_s
        self._which = which

    async def verify(self, paths: Sequence[str]) -> VerificationFinished:
        """Run the checks `paths` call for and report them; round 1 (the loop renumbers)."""
        checks = detect_checks(self._root, paths, which=self._which)
        report = await Verifier(self._executor, self._root, timeout_s=self._timeout_s).run(checks)
        return verification_event(report, paths)


def verification_event(report: VerificationReport, paths: Sequence[str]) -> VerificationFinished:
    """The event for a verification report of `paths`."""
    failed = [check for check in report.checks if check.status in ("failed", "timed_out")]
    blocking = any(f.kind in FIXABLE for check in failed for f in check.failures)
    return VerificationFinished(
        ok=report.ok,
        blocking=blocking,
        paths=tuple(paths),
        checks=tuple(
            CheckOutcome(name=c.name, status=c.status, failures=len(c.failures))
            for c in report.checks
        ),
        failures=tuple(
            VerifyFailure(
                kind=f.kind,
                tool=f.tool,
                message=f.message,
                file=f.file,
                line=f.line,
                test=f.test,
                code=f.code,
            )
            for f in report.failures[:MAX_FAILURES_IN_EVENT]
        ),
        report=report.render(),
    )
