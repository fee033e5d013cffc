"""The security gate: secrets and risky code on the lines a change added.

    report = security_gate(root, ["app/settings.py"], baseline=baseline)
    if report.blocking:
        ...  # never applied without a person's explicit decision

It reads files and nothing else: the scanners (detect-secrets, bandit, a private key check) run
in Kestrel's own process and no program of the repository runs. Findings are `Failure`s of kind
`security`, so verification shows them to the model like test failures; the apply checks the
gate again on the final change (`gate_change_set`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.workspace.changes import ChangeSet
from kestrel.workspace.verify.bandit_scan import bandit_findings
from kestrel.workspace.verify.changed_text import (
    Baseline,
    ChangedText,
    Collected,
    from_change_set,
    from_disk,
)
from kestrel.workspace.verify.detect import normalize_paths
from kestrel.workspace.verify.failures import CheckResult, Failure, Finding
from kestrel.workspace.verify.secrets_scan import secret_findings

Scanner = Callable[[Sequence[ChangedText]], list[Finding]]
"""Finds problems on the added lines of changed text files."""

SCANNERS: dict[str, Scanner] = {"secrets": secret_findings, "bandit": bandit_findings}
CHECK_NAME = "security"
OVERRIDE_HINT = (
    "security gate: {count} blocking finding{s}; the change is applied only when a person "
    "accepts {them}: `kestrel apply {session} --accept-security-findings`"
)


@dataclass(frozen=True, slots=True)
class GateReport:
    """What the gate found on the lines a change added, and which files it could not scan."""

    findings: tuple[Finding, ...] = ()
    scanned: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    """Files not scanned, each as `path: why` (binary, too large)."""

    @property
    def blocking(self) -> tuple[Failure, ...]:
        """Findings that stop the change from being applied without a person's decision."""
        return tuple(f.failure for f in self.findings if f.blocking)

    @property
    def reported(self) -> tuple[Failure, ...]:
        """Findings shown to the model and the person that do not stop the apply."""
        return tuple(f.failure for f in self.findings if not f.blocking)

    def summary(self) -> str:
        """`2 files scanned, 1 blocking, 1 reported; 1 not scanned (big.json: larger …)`."""
        files = len(self.scanned)
        text = f"{files} file{'s' if files != 1 else ''} scanned"
        if self.findings:
            text += f", {len(self.blocking)} blocking, {len(self.reported)} reported"
        if self.skipped:
            text += f"; {len(self.skipped)} not scanned ({', '.join(self.skipped[:3])})"
        return text


def security_gate(
    root: Path, changed: Sequence[str] | ChangeSet, *, baseline: Baseline | None = None
) -> GateReport:
    """Scan what a change added: a `ChangeSet` (both sides of each file), or changed paths
    under `root` as they are now, compared with `baseline` (without one, every line of a
    changed file counts as added)."""
    if isinstance(changed, ChangeSet):
        return scan(from_change_set(changed))
    return scan(from_disk(root, normalize_paths(root, changed), baseline))


def gate_change_set(changes: ChangeSet) -> GateReport:
    """The gate over a change set, as the apply checks it; reads no file."""
    return scan(from_change_set(changes))


def scan(collected: Collected, scanners: dict[str, Scanner] | None = None) -> GateReport:
    """Run every scanner over the collected added lines.

    A scanner that breaks is a blocking finding of kind `error`: the change is neither passed
    unscanned nor lost to the crash; the model is not sent to fix it, a person decides."""
    texts = collected.texts
    findings: list[Finding] = []
    for name, scanner in (SCANNERS if scanners is None else scanners).items():
        findings.extend(_guarded(name, scanner, texts))
    findings.sort(key=lambda f: (not f.blocking, f.failure.file or "", f.failure.line or 0))
    return GateReport(
        findings=tuple(findings),
        scanned=tuple(text.path for text in texts),
        skipped=collected.skipped,
    )


def _guarded(name: str, scanner: Scanner, texts: Sequence[ChangedText]) -> list[Finding]:
    if not texts:
        return []
    try:
        return scanner(texts)
    except Exception as exc:  # a third-party scanner's bug, reported as a finding
        # Only the type: an exception's text may quote the very line it choked on.
        message = (
            f"the {name} scanner broke ({type(exc).__name__}), so the change is not known to be "
            "free of secrets and risky code; a person must look at it before it is applied"
        )
        failure = Failure(message=message, kind="error", tool=name)
        return [Finding(failure=failure, blocking=True)]


def gate_check(report: GateReport) -> CheckResult | None:
    """The gate as one verification check; None when the change added no text to scan."""
    if not report.scanned and not report.skipped:
        return None
    return CheckResult(
        name=CHECK_NAME,
        command=(),
        status="failed" if report.blocking else "passed",
        failures=(*report.blocking, *report.reported),
        summary=report.summary(),
    )


def finding_lines(failures: Sequence[Failure], limit: int | None = None) -> tuple[str, ...]:
    """One line per finding, `file:line: what [tool code]`, for events and the person; past
    `limit`, one line says how many more there are."""
    shown = failures if limit is None else failures[:limit]
    lines = [
        f"{f.location() or '?'}: {f.message} [{f.tool}{' ' + f.code if f.code else ''}]"
        for f in shown
    ]
    if len(failures) > len(shown):
        lines.append(f"… {len(failures) - len(shown)} more security findings")
    return tuple(lines)


def override_hint(report: GateReport, session_id: str) -> str:
    """How a person applies a change the gate blocks, having read its findings."""
    count = len(report.blocking)
    one = count == 1
    return OVERRIDE_HINT.format(
        count=count, s="" if one else "s", them="it" if one else "them", session=session_id
    )
