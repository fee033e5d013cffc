"""The verifier with the real local executor: end to end, and every way a check can end."""

from __future__ import annotations

from pathlib import Path

import pytest
from verify_kit import need, python_project, venv_which, write

from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.local import LocalExecutor
from kestrel.workspace.verify import (
    Check,
    CheckResult,
    Failure,
    Parsed,
    VerificationReport,
    Verifier,
    detect_checks,
    judge,
)
from kestrel.workspace.verify.parsers import parse_go_test
from kestrel.workspace.verify.runner import relocate


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return python_project(tmp_path / "project")


def verifier(root: Path, timeout_s: float = 120.0) -> Verifier:
    return Verifier(LocalExecutor(), root, timeout_s=timeout_s)


@pytest.mark.system
async def test_a_python_change_end_to_end(project):
    need("ruff")
    need("mypy")
    checks = detect_checks(project, ["pkg/calc.py"], which=venv_which)
    assert [check.name for check in checks] == ["syntax", "ruff", "mypy", "pytest"]
    report = await verifier(project).run(checks)
    status = {check.name: check.status for check in report.checks}
    assert status == {"syntax": "passed", "ruff": "failed", "mypy": "failed", "pytest": "failed"}
    assert not report.ok
    assert [(f.tool, f.file, f.line, f.code, f.test) for f in report.failures] == [
        # ruff prints absolute paths: they come back relative to the root.
        ("ruff", "pkg/calc.py", 1, "F401", None),
        ("mypy", "pkg/calc.py", 9, "return-value", None),
        ("pytest", "tests/test_calc.py", 10, None, "tests/test_calc.py::test_add_wrong"),
    ]
    lines = report.render().splitlines()
    assert lines[0] == "verification failed (3 of 4 checks)"
    assert "pkg/calc.py:1: [lint/ruff F401] `os` imported but unused" in lines
    assert (
        "tests/test_calc.py:10: [test/pytest] assert 4 == 5 (tests/test_calc.py::test_add_wrong)"
        in lines
    )


@pytest.mark.system
async def test_a_fixed_change_passes(project):
    need("ruff")
    write(project, {"pkg/calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n"})
    write(
        project,
        {
            "tests/test_calc.py": "from pkg.calc import add\n\n\ndef test_add():\n"
            "    assert add(2, 2) == 4\n"
        },
    )
    checks = detect_checks(project, ["pkg/calc.py"], which=venv_which)
    report = await verifier(project).run(checks)
    assert report.ok, report.render()
    assert report.render().splitlines()[0] == "verification passed"


async def test_syntax_errors_are_located(tmp_path):
    write(tmp_path, {"a.py": "def f(:\n    return 1\n", "b.ts": "let x = (1 + ;\n", "c.md": "#"})
    check = Check(
        name="syntax", command=(), parser="syntax", cwd=tmp_path, paths=("a.py", "b.ts", "gone.py")
    )
    result = await verifier(tmp_path).run_check(check)
    assert result.status == "failed"
    assert [(f.file, f.line, f.column, f.kind, f.tool) for f in result.failures] == [
        ("a.py", 1, 7, "syntax", "tree-sitter"),
        ("b.ts", 1, 7, "syntax", "tree-sitter"),
    ]
    assert [f.message for f in result.failures] == [
        "syntax error: missing `)`",
        "syntax error at `= (1 +`",
    ]
    assert result.summary == "2 files parsed, 2 errors"


async def test_a_crash_with_unreadable_output_is_an_error_with_its_tail(tmp_path):
    script = "echo starting; echo 'Traceback: something broke' >&2; exit 3"
    check = Check(name="ruff", command=("sh", "-c", script), parser="ruff", cwd=tmp_path)
    result = await verifier(tmp_path).run_check(check)
    assert (result.status, result.exit_code) == ("error", 3)
    [failure] = result.failures
    assert failure.kind == "error" and failure.tool == "ruff"
    assert "exited with code 3" in failure.message
    assert failure.message.endswith("starting\nTraceback: something broke")


async def test_a_missing_program_is_an_error(tmp_path):
    check = Check(name="lint", command=("no-such-tool-kestrel",), parser="ruff", cwd=tmp_path)
    result = await verifier(tmp_path).run_check(check)
    assert (result.status, result.exit_code) == ("error", 127)
    assert "not found" in result.failures[0].message


async def test_a_missing_directory_is_an_error(tmp_path):
    check = Check(name="go test", command=("true",), parser="go_test", cwd=tmp_path / "gone")
    result = await verifier(tmp_path).run_check(check)
    assert result.status == "error" and result.summary == "could not run"


async def test_a_slow_check_times_out(tmp_path):
    check = Check(
        name="slow", command=("sh", "-c", "echo begun; sleep 30"), parser="exit_code", cwd=tmp_path
    )
    result = await verifier(tmp_path, timeout_s=0.5).run_check(check)
    assert result.status == "timed_out" and result.exit_code is None
    assert result.summary == "timed out after 0.5 s"
    assert result.failures[-1].message.endswith("begun")


async def test_exit_codes_decide_when_nothing_is_parsed(tmp_path):
    passing = Check(name="ok", command=("true",), parser="exit_code", cwd=tmp_path)
    failing = Check(name="npm test", command=("false",), parser="exit_code", cwd=tmp_path)
    empty = Check(
        name="pytest",
        command=("sh", "-c", "exit 5"),
        parser="pytest",
        cwd=tmp_path,
        ok_exit_codes=(0, 5),
    )
    report = await verifier(tmp_path).run([passing, failing, empty])
    assert [check.status for check in report.checks] == ["passed", "error", "passed"]
    assert not report.ok


def result(output: str, exit_code: int = 1) -> ExecResult:
    return ExecResult(exit_code=exit_code, output=output)


def test_judge_trusts_reported_failures_over_the_exit_code(tmp_path):
    check = Check(name="mypy", command=("mypy",), parser="mypy", cwd=tmp_path)
    parsed = Parsed((Failure(file="a.py", line=1, message="bad", kind="type", tool="mypy"),))
    judged = judge(check, result("", exit_code=0), parsed, root=tmp_path, timeout_s=1)
    assert judged.status == "failed"


def test_judge_places_package_relative_files_under_the_root(tmp_path):
    check = Check(
        name="go test ./pricing", command=("go",), parser="go_test", cwd=tmp_path / "pricing"
    )
    output = (
        "--- FAIL: TestTotal (0.00s)\n    pricing_test.go:12: wrong\nFAIL\texample.com/x\t0.01s\n"
    )
    judged = judge(check, result(output), parse_go_test(output), root=tmp_path, timeout_s=1)
    assert [(f.file, f.line) for f in judged.failures] == [("pricing/pricing_test.go", 12)]


@pytest.mark.parametrize(
    ("file", "cwd", "expected"),
    [
        ("/r/pkg/a.py", ".", "pkg/a.py"),
        ("/elsewhere/a.py", ".", "/elsewhere/a.py"),
        ("./a.go", "sub", "sub/a.go"),
        ("../../outside.go", "sub", "../../outside.go"),
        ("src/lib.rs", ".", "src/lib.rs"),
    ],
)
def test_relocate(file, cwd, expected):
    root = Path("/r")
    failure = Failure(file=file, line=1, message="m", kind="lint", tool="t")
    assert relocate(failure, root, root / cwd).file == expected


def test_messages_are_capped_with_a_note():
    long = Failure(message="\n".join(f"line {n}" for n in range(40)), kind="test", tool="pytest")
    lines = long.message.splitlines()
    assert lines[:12] == [f"line {n}" for n in range(12)]
    assert lines[-1] == "… (28 more lines)"
    wide = Failure(message="x" * 5000, kind="lint", tool="ruff")
    assert wide.message.endswith("… (3500 more characters)")


def test_render_caps_failures_and_says_how_many_were_left_out():
    failures = tuple(
        Failure(file="a.py", line=n, message=f"problem {n}", kind="lint", tool="ruff", code="E1")
        for n in range(1, 51)
    )
    report = VerificationReport(
        (
            CheckResult(name="syntax", command=(), status="passed", summary="1 files parsed"),
            CheckResult(name="ruff", command=("ruff",), status="failed", failures=failures),
        )
    )
    lines = report.render(max_failures=10).splitlines()
    assert lines[:3] == [
        "verification failed (1 of 2 checks)",
        "  syntax: passed (1 files parsed)",
        "  ruff: failed",
    ]
    assert lines[3] == "a.py:1: [lint/ruff E1] problem 1"
    assert lines[-1] == "… 40 more failures not shown (showing the first 10)"
    assert len(lines) == 3 + 10 + 1


def test_render_keeps_the_test_id_when_shortening():
    failure = Failure(
        file="t.py", line=3, test="t.py::test_x", message="y" * 1000, kind="test", tool="pytest"
    )
    line = failure.render()
    assert line.endswith("… (t.py::test_x)") and len(line) <= 320


def test_an_empty_report_is_ok():
    assert VerificationReport().ok
    assert VerificationReport().render() == "verification: no checks apply to these changes"
