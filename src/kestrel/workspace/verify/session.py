"""Verification as a session runs it: pick the checks for the changed files, run them in the
workspace through the command executor, add the security gate, and report a
`verification_finished` event."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

from kestrel.protocol.events import CheckOutcome, VerificationFinished, VerifyFailure
from kestrel.workspace.verify.changed_text import Baseline
from kestrel.workspace.verify.detect import Which, detect_checks
from kestrel.workspace.verify.failures import CheckResult, VerificationReport
from kestrel.workspace.verify.imports import own_missing_modules
from kestrel.workspace.verify.runner import CommandExecutor, Verifier
from kestrel.workspace.verify.security import gate_check, security_gate

FIXABLE = frozenset({"test", "lint", "type", "syntax", "build", "security"})
"""Failure kinds the model can act on; an `error` (a tool missing or crashing) is only shown."""
MAX_FAILURES_IN_EVENT = 100
NOT_RUN = "not run: it runs the project's own code, which Kestrel does unasked only in the sandbox"
IN_PROCESS = frozenset({"syntax"})
"""Parsers of checks Kestrel makes itself, in its own process: they run with or without a
sandbox."""


Unconfined = Callable[[], Awaitable[str]]
"""Says why checks may not run the project's programs here, e.g. "the sandbox cannot start"."""


class SessionVerifier:
    """Checks a session's changed files in its workspace (the agent loop's `Verifier`).

    With `unconfined` set, the session's commands run outside any sandbox: a check that would
    run the project's own programs (its tests, linters, build) is not run on its own, and the
    event says plainly that the change was not verified, and why. Checks Kestrel makes itself
    (syntax, the security gate) still run.

    The security gate scans only the lines the change added: `baseline` says what each changed
    file held when the change began (without one, whole changed files are scanned).
    """

    def __init__(
        self,
        executor: CommandExecutor,
        root: Path,
        *,
        timeout_s: float = 300.0,
        which: Which = shutil.which,
        unconfined: Unconfined | None = None,
        baseline: Baseline | None = None,
    ) -> None:
        self._executor = executor
        self._root = root
        self._timeout_s = timeout_s
        self._which = which
        self._unconfined = unconfined
        self._baseline = baseline

    async def verify(self, paths: Sequence[str]) -> VerificationFinished:
        """Run the checks `paths` call for and report them; round 1 (the loop renumbers)."""
        checks = detect_checks(self._root, paths, which=self._which)
        held = [c for c in checks if c.parser not in IN_PROCESS] if self._unconfined else []
        run = [c for c in checks if c not in held]
        report = await Verifier(self._executor, self._root, timeout_s=self._timeout_s).run(run)
        report = own_missing_modules(report, self._root, paths)
        gate = await asyncio.to_thread(security_gate, self._root, paths, baseline=self._baseline)
        if (security := gate_check(gate)) is not None:
            report = VerificationReport((*report.checks, security))
        if not held or self._unconfined is None:
            return verification_event(report, paths)
        why = await self._unconfined()
        skipped = tuple(
            CheckResult(name=c.name, command=c.command, status="skipped", summary=NOT_RUN)
            for c in held
        )
        full = VerificationReport((*report.checks, *skipped))
        event = verification_event(full, paths)
        return replace(event, ok=False, report=full.render(f"not verified: {why}"))


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
