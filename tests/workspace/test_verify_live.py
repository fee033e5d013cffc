"""The parsers against live output of the real tools, run on a throwaway project."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from verify_kit import need, python_project, run, write

from kestrel.workspace.verify.parsers import (
    parse_cargo,
    parse_junit,
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_unittest,
)

pytestmark = pytest.mark.system


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return python_project(tmp_path / "project")


def test_live_pytest(project):
    output = run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"], project)
    parsed = parse_pytest(output)
    assert parsed.summary.startswith("1 failed, 2 passed"), output
    [failure] = parsed.failures
    assert failure.test == "tests/test_calc.py::test_add_wrong"
    assert (failure.file, failure.line, failure.kind) == ("tests/test_calc.py", 10, "test")
    assert failure.message == "assert 4 == 5"


def test_live_pytest_collection_error(project):
    write(project, {"tests/test_broken.py": "def test_x(:\n    pass\n"})
    output = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    [failure] = parse_pytest(output).failures
    assert failure.kind == "syntax" and failure.test is None
    assert failure.file is not None and failure.file.endswith("tests/test_broken.py")
    assert failure.line == 1


def test_live_pytest_junit(project, tmp_path):
    report = tmp_path / "report.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    run(argv, project)
    parsed = parse_junit(report.read_text(encoding="utf-8"))
    [failure] = parsed.failures
    assert failure.test == "tests.test_calc::test_add_wrong"
    assert (failure.file, failure.line, failure.message) == (
        "tests/test_calc.py",
        10,
        "assert 4 == 5",
    )
    assert parsed.summary == "3 tests, 1 failed or errored, 0 skipped"


def test_live_unittest(project):
    write(
        project,
        {
            "tests/__init__.py": "",
            "tests/test_unit.py": (
                "import unittest\n\nfrom pkg.calc import add\n\n\n"
                "class AddTest(unittest.TestCase):\n"
                "    def test_sum(self):\n"
                "        self.assertEqual(add(1, 2), 4)\n"
            ),
        },
    )
    output = run([sys.executable, "-m", "unittest", "tests.test_unit"], project)
    [failure] = parse_unittest(output).failures
    assert failure.test == "tests.test_unit.AddTest.test_sum"
    assert failure.file is not None and failure.file.endswith("tests/test_unit.py")
    assert (failure.line, failure.message) == (8, "AssertionError: 3 != 4")


@pytest.mark.parametrize("output_format", ["json", "concise", "full"])
def test_live_ruff(project, output_format):
    ruff = need("ruff")
    argv = [ruff, "check", "--no-fix", f"--output-format={output_format}", "pkg"]
    failures = parse_ruff(run(argv, project)).failures
    assert [(Path(f.file or "").name, f.line, f.column, f.code) for f in failures] == [
        ("calc.py", 1, 8, "F401")
    ]


def test_live_mypy(project):
    mypy = need("mypy")
    output = run([mypy, "--show-column-numbers", "--cache-dir=/dev/null"], project)
    parsed = parse_mypy(output)
    assert [(f.file, f.line, f.column, f.code, f.kind) for f in parsed.failures] == [
        ("pkg/calc.py", 9, 12, "return-value", "type")
    ], output
    assert parsed.summary.startswith("Found 1 error in 1 file")


def test_live_cargo(tmp_path):
    cargo = need("cargo")
    write(
        tmp_path / "crate",
        {
            "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": (
                "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
                "#[cfg(test)]\nmod tests {\n    #[test]\n    fn sums() {\n"
                "        assert_eq!(super::add(2, 2), 5);\n    }\n}\n"
            ),
        },
    )
    crate = tmp_path / "crate"
    env = {"CARGO_TARGET_DIR": str(tmp_path / "target"), "RUST_BACKTRACE": "0"}
    tests = parse_cargo(run([cargo, "test", "--offline", "--color", "never"], crate, **env))
    [failure] = tests.failures
    assert (failure.test, failure.file, failure.line) == ("tests::sums", "src/lib.rs", 9)
    assert failure.message.startswith("assertion `left == right` failed")

    write(crate, {"src/lib.rs": 'pub fn add() -> i32 {\n    "no"\n}\n'})
    argv = [cargo, "check", "--offline", "--message-format=json"]
    [error] = parse_cargo(run(argv, crate, **env)).failures
    assert (error.file, error.line, error.code, error.kind) == ("src/lib.rs", 2, "E0308", "build")
