"""A change whose checks could not run is said to be unverified, not passed over in silence."""

from __future__ import annotations

from kestrel.cli.render import not_verified
from kestrel.protocol.events import CheckOutcome, VerificationFinished


def event(*checks: tuple[str, str], ok: bool = False) -> VerificationFinished:
    return VerificationFinished(
        ok=ok,
        blocking=False,
        paths=("a.py",),
        checks=tuple(CheckOutcome(name=n, status=s, failures=1) for n, s in checks),
        failures=(),
        report="verification failed (1 of 2 checks)",
    )


def test_a_check_that_could_not_run_leaves_the_change_unverified() -> None:
    why = not_verified(event(("syntax", "passed"), ("pytest", "error")))
    assert why is not None and why.startswith("not verified: pytest could not run")


def test_failures_that_ran_are_not_called_unverified() -> None:
    assert not_verified(event(("syntax", "passed"), ("pytest", "failed"))) is None
    assert not_verified(event(("pytest", "passed"), ok=True)) is None


def test_skipped_checks_keep_the_reports_own_reason() -> None:
    skipped = VerificationFinished(
        ok=False,
        blocking=False,
        paths=("a.py",),
        checks=(CheckOutcome(name="pytest", status="skipped", failures=0),),
        failures=(),
        report="not verified: the sandbox cannot start\n  pytest: skipped",
    )
    assert not_verified(skipped) == "not verified: the sandbox cannot start"
