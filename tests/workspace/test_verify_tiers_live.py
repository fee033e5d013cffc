"""The two pytest tiers run for real: a slow importing test times out on its own, shorter timeout
while the nearest tests' results stand, and the verification does not block on it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from verify_kit import venv_which, write

from kestrel.sandbox.local import LocalExecutor
from kestrel.workspace.verify import Check, Verifier, detect_checks
from kestrel.workspace.verify.session import verification_event

pytestmark = pytest.mark.system

CALC = "def add(a: int, b: int) -> int:\n    return a + b\n"
NEAREST = "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
SLOW = "import time\n\nfrom pkg.calc import add\n\n\ndef test_slow():\n    time.sleep(60)\n"
WRONG = "from pkg.calc import add\n\n\ndef test_wrong():\n    assert add(2, 2) == 5\n"


def project(root: Path, wide: str) -> Path:
    write(
        root,
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC,
            "tests/test_calc.py": NEAREST,
            "tests/integration/test_uses_calc.py": wide,
        },
    )
    return root


def pytest_checks(root: Path, *, importers_timeout_s: float | None = None) -> list[Check]:
    checks = [
        c for c in detect_checks(root, ["pkg/calc.py"], which=venv_which) if c.parser == "pytest"
    ]
    assert [c.name for c in checks] == ["pytest", "pytest (importers)"]
    if importers_timeout_s is not None:
        checks[1] = replace(checks[1], timeout_s=importers_timeout_s)
    return checks


async def test_slow_importers_time_out_without_hiding_or_blocking_the_nearest(tmp_path: Path):
    root = project(tmp_path / "project", SLOW)
    checks = pytest_checks(root, importers_timeout_s=1.0)

    report = await Verifier(LocalExecutor(), root).run(checks)
    event = verification_event(report, ["pkg/calc.py"])

    nearest, wider = report.checks
    assert (nearest.name, nearest.status) == ("pytest", "passed"), report.render()
    assert nearest.summary.startswith("1 passed")
    assert (wider.name, wider.status) == ("pytest (importers)", "timed_out")
    assert wider.summary == "timed out after 1 s"
    assert [f.kind for f in wider.failures] == ["error"]
    assert not event.ok and not event.blocking
    assert "  pytest: passed (1 passed" in event.report
    assert "  pytest (importers): timed out (timed out after 1 s)" in event.report


async def test_a_failing_importer_still_blocks(tmp_path: Path):
    root = project(tmp_path / "project", WRONG)

    report = await Verifier(LocalExecutor(), root).run(pytest_checks(root))
    event = verification_event(report, ["pkg/calc.py"])

    assert [(c.name, c.status) for c in report.checks] == [
        ("pytest", "passed"),
        ("pytest (importers)", "failed"),
    ]
    [failure] = report.failures
    assert failure.file == "tests/integration/test_uses_calc.py" and failure.kind == "test"
    assert event.blocking


async def test_a_checks_note_follows_its_summary_however_it_ends(tmp_path: Path):
    note = "14 more importing test files left out"
    passing = Check(name="ok", command=("true",), parser="exit_code", cwd=tmp_path, note=note)
    slow = replace(passing, name="slow", command=("sleep", "30"), timeout_s=0.5)

    report = await Verifier(LocalExecutor(), tmp_path).run([passing, slow])

    # exit_code checks have no summary of their own: the note stands alone.
    assert [(c.status, c.summary) for c in report.checks] == [
        ("passed", note),
        ("timed_out", f"timed out after 0.5 s; {note}"),
    ]
