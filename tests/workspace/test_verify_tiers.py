"""The related tests in two tiers: the nearest run first with the full timeout, the importers after
them with a shorter one and a cap, decided over an in-memory project."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kestrel.sandbox.local import LocalExecutor
from kestrel.workspace.verify import (
    Check,
    MemoryFiles,
    RelatedTests,
    Verifier,
    detect_checks,
    related_test_tiers,
    related_tests,
)
from kestrel.workspace.verify.detect import IMPORTERS_TIMEOUT_S
from kestrel.workspace.verify.related import rank_by_nearness

ROOT = Path("/work/project")
MODULE = "pkg/functions/elementary/miscellaneous.py"
IMPORT = "from pkg.functions.elementary.miscellaneous import Max\n"

PROJECT = {
    "pkg/__init__.py": "",
    "pkg/functions/__init__.py": "",
    "pkg/functions/elementary/__init__.py": "",
    MODULE: "def Max(): ...\n",
    "pkg/functions/elementary/tests/test_miscellaneous.py": IMPORT,
    "pkg/functions/elementary/tests/test_trigonometric.py": IMPORT,
    "pkg/functions/special/tests/test_gamma.py": IMPORT,
    "pkg/core/tests/test_args.py": IMPORT,
    "pkg/solvers/tests/test_solveset.py": "import pkg.functions.elementary.miscellaneous\n",
    "pkg/core/tests/test_basic.py": "import os\n",
}


def which(name: str) -> str | None:
    return f"/usr/bin/{name}" if name == "python3" else None


def pytest_checks(files: dict[str, str], changed: list[str]) -> dict[str, Check]:
    found = detect_checks(ROOT, changed, files=MemoryFiles(files), which=which)
    return {check.name: check for check in found if check.parser == "pytest"}


def targets(check: Check) -> tuple[str, ...]:
    return check.command[check.command.index("no:cacheprovider") + 1 :]


def test_the_nearest_tests_and_the_importers_nearest_first():
    tiers = related_test_tiers([MODULE], MemoryFiles(PROJECT))
    assert tiers == RelatedTests(
        nearest=("pkg/functions/elementary/tests/test_miscellaneous.py",),
        importers=(
            "pkg/functions/elementary/tests/test_trigonometric.py",
            "pkg/functions/special/tests/test_gamma.py",
            "pkg/core/tests/test_args.py",
            "pkg/solvers/tests/test_solveset.py",
        ),
        left_out=0,
    )


def test_related_tests_is_still_the_union():
    union = related_tests([MODULE], MemoryFiles(PROJECT))
    assert union == tuple(sorted(p for p in PROJECT if "/test_" in p and "basic" not in p))


def test_the_importers_are_capped_and_the_rest_counted():
    tiers = related_test_tiers([MODULE], MemoryFiles(PROJECT), max_importers=2)
    assert tiers.importers == (
        "pkg/functions/elementary/tests/test_trigonometric.py",
        "pkg/functions/special/tests/test_gamma.py",
    )
    assert tiers.left_out == 2
    assert len(related_tests([MODULE], MemoryFiles(PROJECT))) == 5


def test_a_changed_test_and_a_changed_conftest_are_nearest():
    files = {**PROJECT, "pkg/core/tests/conftest.py": ""}
    changed = [MODULE, "pkg/solvers/tests/test_solveset.py", "pkg/core/tests/conftest.py"]
    tiers = related_test_tiers(changed, MemoryFiles(files))
    assert tiers.nearest == (
        "pkg/core/tests",
        "pkg/functions/elementary/tests/test_miscellaneous.py",
        "pkg/solvers/tests/test_solveset.py",
    )
    # test_args.py runs with its conftest's folder, and test_solveset.py as a changed test.
    assert tiers.importers == (
        "pkg/functions/elementary/tests/test_trigonometric.py",
        "pkg/functions/special/tests/test_gamma.py",
    )


def test_a_root_conftest_leaves_no_importers():
    files = {**PROJECT, "conftest.py": ""}
    tiers = related_test_tiers([MODULE, "conftest.py"], MemoryFiles(files))
    assert tiers.nearest[0] == "." and tiers.importers == ()


def test_nearness_counts_shared_leading_folders():
    ranked = rank_by_nearness(
        ["b/tests/test_x.py", "a/b/c/tests/test_y.py", "a/tests/test_z.py", "test_top.py"],
        ["a/b/c/mod.py", "b/other.py"],
    )
    assert ranked == [
        "a/b/c/tests/test_y.py",
        "a/tests/test_z.py",
        "b/tests/test_x.py",
        "test_top.py",
    ]


def test_detect_makes_two_pytest_checks_with_the_importers_timed_shorter():
    found = pytest_checks(PROJECT, [MODULE])
    assert list(found) == ["pytest", "pytest (importers)"]
    nearest, wider = found["pytest"], found["pytest (importers)"]
    assert targets(nearest) == ("pkg/functions/elementary/tests/test_miscellaneous.py",)
    assert nearest.timeout_s is None and nearest.note == ""
    assert targets(wider)[0] == "pkg/functions/elementary/tests/test_trigonometric.py"
    assert len(targets(wider)) == 4
    assert wider.timeout_s == IMPORTERS_TIMEOUT_S == 120.0
    assert wider.ok_exit_codes == (0, 5) and wider.note == ""


def test_a_huge_importer_tier_says_how_many_were_left_out():
    many = {f"pkg/t{n:02}/tests/test_uses_{n:02}.py": IMPORT for n in range(40)}
    found = pytest_checks({**PROJECT, **many}, [MODULE])
    wider = found["pytest (importers)"]
    assert len(targets(wider)) == 30
    # The nearest importers are kept; the far ones are dropped first.
    assert targets(wider)[:2] == (
        "pkg/functions/elementary/tests/test_trigonometric.py",
        "pkg/functions/special/tests/test_gamma.py",
    )
    assert wider.note == "14 more importing test files left out"


def test_without_nearest_tests_the_importers_are_the_pytest_check():
    files = {k: v for k, v in PROJECT.items() if "test_miscellaneous" not in k}
    found = pytest_checks(files, [MODULE])
    assert list(found) == ["pytest"]
    assert found["pytest"].timeout_s is None
    assert targets(found["pytest"])[-1] == "pkg/solvers/tests/test_solveset.py"


def test_no_importers_no_second_check():
    found = pytest_checks(PROJECT, ["pkg/core/tests/test_basic.py"])
    assert list(found) == ["pytest"]


def test_a_full_run_is_one_check():
    found = detect_checks(ROOT, [MODULE], full=True, files=MemoryFiles(PROJECT), which=which)
    assert [check.name for check in found if check.parser == "pytest"] == ["pytest"]


def test_a_check_timeout_never_exceeds_the_verifiers():
    check = Check(name="x", command=("true",), parser="exit_code", cwd=ROOT)
    verifier = Verifier(LocalExecutor(), ROOT, timeout_s=300)
    assert verifier.timeout_for(check) == 300
    assert verifier.timeout_for(replace(check, timeout_s=120)) == 120
    low = Verifier(LocalExecutor(), ROOT, timeout_s=5)
    assert low.timeout_for(replace(check, timeout_s=120)) == 5
