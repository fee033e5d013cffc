"""The security gate before a push: what the pushed commit adds over its base, scanned as an
apply would scan it; a blocking finding stops the push unless the person accepted it."""

from __future__ import annotations

from pathlib import Path

from kestrel.delivery.branch import DeliveryError, changed_files, file_at
from kestrel.workspace.verify.changed_text import ChangedText, Collected, changed_text
from kestrel.workspace.verify.security import GateReport, scan


def check_commit(checkout: Path, base: str, commit: str) -> GateReport:
    """The gate's report on what `commit` adds over `base`."""
    texts: list[ChangedText] = []
    skipped: list[str] = []
    for path in changed_files(checkout, base, commit):
        new = file_at(checkout, commit, path)
        if new is None:
            continue  # deleted: nothing added
        found = changed_text(path, file_at(checkout, base, path), new)
        if isinstance(found, str):
            skipped.append(found)
        else:
            texts.append(found)
    return scan(Collected(texts=tuple(texts), skipped=tuple(skipped)))


ADVICE = (
    'Fix it in the session (kestrel resume ID "..."), or push it anyway with '
    "--accept-security-findings"
)


def refuse_blocking(report: GateReport, *, accepted: bool, advice: str = ADVICE) -> None:
    """DeliveryError naming each blocking finding, unless the person accepted them (`advice`
    says what they can do)."""
    if not report.blocking or accepted:
        return
    lines = [f"- {f.file}:{f.line or ''} {f.message}" for f in report.blocking[:20]]
    raise DeliveryError(
        "the change adds what the security gate blocks, so nothing was pushed:\n"
        + "\n".join(lines)
        + "\n"
        + advice
    )
