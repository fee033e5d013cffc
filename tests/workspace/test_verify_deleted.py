"""Files the change deleted are not verified: no check names them, none fails for their absence,
and what still imports a deleted module is tested."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from verify_kit import venv_which, write

from kestrel.sandbox.local import LocalExecutor
from kestrel.workspace.verify.detect import detect_checks
from kestrel.workspace.verify.session import SessionVerifier

pytestmark = pytest.mark.system

PYPROJECT = """\
[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F"]
"""

ADD = "def add(a: int, b: int) -> int:\n    return a + b\n"
TEST_ADD = "from pkg.calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 2) == 4\n"

DELETED = (
    "pkg/old.py",
    "tests/test_old.py",
    "tests/legacy/conftest.py",
    "tests/legacy/test_legacy.py",
)


def _project(root: Path) -> Path:
    write(
        root,
        {
            "pyproject.toml": PYPROJECT,
            "pkg/__init__.py": "",
            "pkg/calc.py": ADD,
            "tests/test_calc.py": TEST_ADD,
        },
    )
    return root


def _which(name: str) -> str | None:
    return venv_which(name)


def test_no_check_names_a_deleted_path(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    changed = ["pkg/calc.py", *DELETED]

    checks = detect_checks(root, changed, which=_which)

    assert {check.name for check in checks} >= {"syntax", "pytest"}
    for check in checks:
        named = {*check.paths, *(arg.removeprefix("./") for arg in check.command)}
        assert not named & {*DELETED, "tests/legacy"}, check
    [pytest_check] = [check for check in checks if check.name == "pytest"]
    assert pytest_check.command[-1] == "tests/test_calc.py"


def test_a_change_that_deletes_files_verifies_clean(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    verifier = SessionVerifier(LocalExecutor(), root, which=_which)

    event = asyncio.run(verifier.verify(["pkg/calc.py", *DELETED]))

    assert event.ok, event.report
    assert all(check.status == "passed" for check in event.checks), event.checks


def test_tests_importing_a_deleted_module_still_run_and_fail(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    (root / "pkg/calc.py").unlink()
    verifier = SessionVerifier(LocalExecutor(), root, which=_which)

    event = asyncio.run(verifier.verify(["pkg/calc.py"]))

    # The change broke the tests' import of the project's own module: the model must fix it.
    assert not event.ok and event.blocking
    assert [(check.name, check.status) for check in event.checks] == [("pytest", "failed")]
    [failure] = event.failures
    assert failure.file == "tests/test_calc.py" and "pkg.calc" in failure.message


def test_a_deleted_top_level_module_blocks_too(tmp_path: Path) -> None:
    root = tmp_path / "project"
    write(root, {"calc.py": ADD, "test_calc.py": TEST_ADD.replace("pkg.calc", "calc")})
    (root / "calc.py").unlink()

    event = asyncio.run(SessionVerifier(LocalExecutor(), root, which=_which).verify(["calc.py"]))

    assert not event.ok and event.blocking, event.report


def test_a_name_the_change_removed_blocks(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    (root / "pkg/calc.py").write_text("def plus(a: int, b: int) -> int:\n    return a + b\n")

    event = asyncio.run(
        SessionVerifier(LocalExecutor(), root, which=_which).verify(["pkg/calc.py"])
    )

    assert not event.ok and event.blocking, event.report
    [failure] = event.failures
    assert "cannot import name 'add'" in failure.message


def test_a_package_missing_from_the_environment_is_shown_but_does_not_block(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "project")
    test = "import surely_not_installed_anywhere\n" + TEST_ADD
    write(root, {"tests/test_calc.py": test})

    event = asyncio.run(
        SessionVerifier(LocalExecutor(), root, which=_which).verify(["pkg/calc.py"])
    )

    assert not event.ok and not event.blocking, event.report
    [failure] = event.failures
    assert failure.kind == "error" and "surely_not_installed_anywhere" in failure.message


def test_a_deleted_conftest_beside_remaining_tests_still_runs_them(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    write(root, {"tests/unit/test_more.py": TEST_ADD})

    checks = detect_checks(root, ["tests/unit/conftest.py"], which=_which)

    assert [check.command[-1] for check in checks if check.name == "pytest"] == ["tests/unit"]
