"""A project whose own test runs pytest on a second, failing project and prints what it printed:
only the outer run's results count, whether its test passes or fails, captured or not."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from verify_kit import write

from kestrel.sandbox.local import LocalExecutor
from kestrel.workspace.verify.detect import PYTEST_OPTIONS, Check
from kestrel.workspace.verify.parsers import parse_pytest
from kestrel.workspace.verify.runner import Verifier

pytestmark = pytest.mark.system

# The fixture project's tests fail; one shares its name with an outer test on purpose.
INNER = """\
def test_inner_fails():
    assert 1 == 2


def test_outer_fails():
    assert "inner" == "x"
"""

OUTER = """\
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent.parent.parent / "fixture"


def _run_fixture():
    argv = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(FIXTURE)]
    done = subprocess.run(argv, capture_output=True, text=True)
    print(done.stdout)
    return done


def test_the_fixture_fails():
    assert _run_fixture().returncode == 1


def test_outer_fails():
    _run_fixture()
    assert 3 == 4
"""

PASSING_OUTER = OUTER.split("\n\ndef test_outer_fails")[0] + "\n"


def _project(tmp_path: Path, outer: str) -> Path:
    write(tmp_path / "fixture", {"test_inner.py": INNER, "pytest.ini": "[pytest]\n"})
    root = tmp_path / "project"
    write(root, {"tests/test_outer.py": outer, "pytest.ini": "[pytest]\n"})
    return root


def _check(root: Path, *extra: str) -> Check:
    command = (sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *extra, "tests/test_outer.py")
    return Check(name="pytest", command=command, parser="pytest", cwd=root, ok_exit_codes=(0, 5))


@pytest.mark.parametrize("extra", [(), ("-s",)], ids=["captured", "not-captured"])
def test_only_the_outer_failure_counts(tmp_path: Path, extra: tuple[str, ...]) -> None:
    root = _project(tmp_path, OUTER)

    result = asyncio.run(Verifier(LocalExecutor(), root).run_check(_check(root, *extra)))

    assert result.status == "failed"
    assert result.summary.startswith("1 failed, 1 passed")
    [failure] = result.failures
    assert failure.test == "tests/test_outer.py::test_outer_fails"
    assert (failure.file, failure.line, failure.message) == (
        "tests/test_outer.py",
        21,
        "assert 3 == 4",
    )


@pytest.mark.parametrize("extra", [(), ("-s",)], ids=["captured", "not-captured"])
def test_a_passing_run_of_a_failing_fixture_passes(tmp_path: Path, extra: tuple[str, ...]) -> None:
    root = _project(tmp_path, PASSING_OUTER)

    result = asyncio.run(Verifier(LocalExecutor(), root).run_check(_check(root, *extra)))

    assert (result.status, result.failures) == ("passed", ())
    assert result.summary.startswith("1 passed")


def test_nested_output_alone_is_still_read() -> None:
    # Without an outer run around it, the same text is an ordinary run's failures.
    output = (
        "=================================== FAILURES ===================================\n"
        "_______________________________ test_inner_fails _______________________________\n"
        "\n    def test_inner_fails():\n>       assert 1 == 2\nE       assert 1 == 2\n\n"
        "fixture/test_inner.py:2: AssertionError\n"
        "=========================== short test summary info ============================\n"
        "FAILED fixture/test_inner.py::test_inner_fails - assert 1 == 2\n"
        "1 failed in 0.01s\n"
    )
    [failure] = parse_pytest(output).failures
    assert (failure.test, failure.line) == ("fixture/test_inner.py::test_inner_fails", 2)
