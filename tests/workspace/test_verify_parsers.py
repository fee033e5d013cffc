"""Output parsers against recorded tool output (see fixtures/verify/README.md), and garbage."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.workspace.verify import PARSERS, Failure, Parsed, parse_output, syntax_failures
from kestrel.workspace.verify.parsers import (
    parse_cargo,
    parse_eslint,
    parse_go_test,
    parse_go_vet,
    parse_junit,
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_tsc,
    parse_unittest,
)
from kestrel.workspace.verify.syntax import GRAMMARS

FIXTURES = Path(__file__).parent / "fixtures" / "verify"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def where(failures: tuple[Failure, ...]) -> list[tuple[str | None, int | None]]:
    return [(f.file, f.line) for f in failures]


# pytest


def test_pytest_rA_pairs_each_block_with_its_node_id():
    parsed = parse_pytest(fixture("pytest_rA.txt"))
    assert parsed.summary == "5 failed, 2 passed, 1 skipped, 1 error in 1.03s"
    by_test = {f.test: f for f in parsed.failures}
    assert set(by_test) == {
        "tests/test_calc.py::test_uses_broken",
        "tests/test_calc.py::test_add_wrong",
        "tests/test_calc.py::test_nested_error",
        "tests/test_calc.py::test_ratio_zero",
        "tests/test_calc.py::test_param[1-2-4]",
        "tests/test_calc.py::test_long_diff",
    }
    wrong = by_test["tests/test_calc.py::test_add_wrong"]
    assert (wrong.file, wrong.line, wrong.message) == ("tests/test_calc.py", 12, "assert 4 == 5")
    assert wrong.kind == "test" and wrong.tool == "pytest"
    # The deepest frame in the project, where the exception was raised.
    zero = by_test["tests/test_calc.py::test_ratio_zero"]
    assert (zero.file, zero.line) == ("pkg/calc.py", 9)
    assert zero.message == "ZeroDivisionError: division by zero"
    param = by_test["tests/test_calc.py::test_param[1-2-4]"]
    assert param.message == "assert 3 == 4\n +  where 3 = add(1, 2)"
    setup = by_test["tests/test_calc.py::test_uses_broken"]
    assert setup.message == "at setup: RuntimeError: fixture exploded"
    assert (setup.file, setup.line) == ("tests/test_calc.py", 34)


def test_pytest_default_output_reads_the_same_failures():
    quiet = parse_pytest(fixture("pytest_rA.txt")).failures
    default = parse_pytest(fixture("pytest_default.txt")).failures
    assert sorted(where(default)) == sorted(where(quiet))
    assert {f.test for f in default} == {f.test for f in quiet}


def test_pytest_collection_errors_name_the_file_and_tell_syntax_apart():
    parsed = parse_pytest(fixture("pytest_collection_errors.txt"))
    assert parsed.summary == "2 errors in 1.15s"
    imports, syntax = parsed.failures
    assert (imports.file, imports.line, imports.kind) == ("tests/test_broken_import.py", 1, "error")
    assert imports.message == "ModuleNotFoundError: No module named 'pkg.missing'"
    assert imports.test is None
    assert (syntax.file, syntax.line, syntax.kind) == (
        "/tmp/vrec/py/tests/test_syntax.py",
        1,
        "syntax",
    )
    assert syntax.message.endswith("SyntaxError: invalid syntax")


def test_pytest_block_titles_longer_than_the_terminal_still_pair_with_their_error():
    """pytest pads a title with at least one `_` a side: a long test path gets two, not three
    (seen on django's tests/bash_completion/management/commands/test_command.py)."""
    path = "tests/bash_completion/management/commands/test_command.py"
    output = (
        "==================================== ERRORS ====================================\n"
        f"__ ERROR collecting {path} __\n"
        f"ImportError while importing test module '/w/{path}'.\n"
        "Traceback:\n"
        f"{path}:1: in <module>\n"
        "    from django.core.management.base import BaseCommand\n"
        "django/utils/deprecation.py:5: in <module>\n"
        "    from asgiref.sync import sync_to_async\n"
        "E   ModuleNotFoundError: No module named 'asgiref'\n"
        "=========================== short test summary info ============================\n"
        f"ERROR {path}\n"
        "1 error in 3.46s\n"
    )
    [failure] = parse_pytest(output).failures
    assert failure.message == "ModuleNotFoundError: No module named 'asgiref'"
    assert (failure.kind, failure.test) == ("error", None)


def test_pytest_summary_lines_alone_still_give_failures():
    output = (
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_a.py::TestThing::test_x - assert 1 == 2\n"
        "1 failed in 0.01s\n"
    )
    [failure] = parse_pytest(output).failures
    assert failure.test == "tests/test_a.py::TestThing::test_x"
    assert (failure.file, failure.line, failure.message) == (
        "tests/test_a.py",
        None,
        "assert 1 == 2",
    )


def test_pytest_usage_errors_are_failures():
    output = "ERROR: file or directory not found: tests/nope.py\n\nno tests ran in 0.01s\n"
    parsed = parse_pytest(output)
    assert parsed.summary == "no tests ran in 0.01s"
    assert [(f.kind, f.message) for f in parsed.failures] == [
        ("error", "ERROR: file or directory not found: tests/nope.py")
    ]


def test_pytest_error_lines_a_test_printed_are_not_usage_errors():
    output = (
        "=================================== FAILURES ===================================\n"
        "____________________________________ test_x ____________________________________\n"
        "\n    def test_x():\n        print('ERROR: printed by the test')\n"
        ">       assert False\nE       assert False\n\ntests/test_a.py:3: AssertionError\n"
        "----------------------------- Captured stdout call -----------------------------\n"
        "ERROR: printed by the test\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_a.py::test_x - assert False\n"
        "1 failed in 0.01s\n"
        "ERROR: not found: tests/test_a.py::nope\n"
    )
    failure, usage = parse_pytest(output).failures
    assert (failure.test, failure.line, failure.message) == (
        "tests/test_a.py::test_x",
        3,
        "assert False",
    )
    assert usage.message == "ERROR: not found: tests/test_a.py::nope"


# unittest


def test_unittest_blocks():
    parsed = parse_unittest(fixture("unittest.txt"))
    assert parsed.summary == "Ran 5 tests in 0.001s; FAILED (failures=2, errors=1, skipped=1)"
    zero, wrong, multi = parsed.failures
    assert zero.test == "tests.test_unit.CalcTest.test_ratio_zero"
    assert (zero.file, zero.line) == ("/tmp/vrec/py/pkg/calc.py", 9)
    assert zero.message == "ZeroDivisionError: division by zero"
    assert (wrong.file, wrong.line) == ("/tmp/vrec/py/tests/test_unit.py", 11)
    assert wrong.message == "AssertionError: 3 != 4 : sums differ"
    assert multi.message.splitlines()[0] == r"AssertionError: 'a\nb\nc' != 'a\nB\nc'"
    assert "- b" in multi.message and "+ B" in multi.message


def test_unittest_import_failure_is_an_error_at_the_test_module():
    failures = parse_unittest(fixture("unittest_import_error.txt")).failures
    [broken] = [f for f in failures if f.kind == "error"]
    assert (broken.file, broken.line) == ("/tmp/vrec/py/tests/test_broken_import.py", 1)
    assert broken.message == "ModuleNotFoundError: No module named 'pkg.missing'"


# ruff

RUFF_EXPECTED = [
    ("pkg/calc.py", 1, 8, "F401"),
    ("pkg/style.py", 1, 1, "E401"),
    ("pkg/style.py", 1, 8, "F401"),
    ("pkg/style.py", 1, 13, "F401"),
    ("pkg/style.py", 2, 1, "UP035"),
    ("pkg/style.py", 5, 10, "UP006"),
    ("pkg/style.py", 6, 5, "E741"),
    ("pkg/style.py", 7, 13, "E711"),
    ("pkg/style.py", 9, 21, "F821"),
]


@pytest.mark.parametrize("name", ["ruff_concise.txt", "ruff_full.txt", "ruff.json"])
def test_ruff_formats_agree(name):
    failures = parse_ruff(fixture(name)).failures
    got = [(f.file.removeprefix("/tmp/vrec/py/"), f.line, f.column, f.code) for f in failures]
    assert got == RUFF_EXPECTED
    assert {f.kind for f in failures} == {"lint"}
    assert failures[0].message == "`os` imported but unused"


@pytest.mark.parametrize("name", ["ruff_syntax.txt", "ruff_syntax.json"])
def test_ruff_syntax_errors(name):
    failures = parse_ruff(fixture(name)).failures
    assert [(f.line, f.kind, f.code) for f in failures] == [
        (1, "syntax", "invalid-syntax"),
        (2, "syntax", "invalid-syntax"),
    ]


def test_old_ruff_syntax_errors_without_a_code():
    [failure] = parse_ruff("a.py:1:5: SyntaxError: Expected ')', found newline\n").failures
    assert (failure.kind, failure.code) == ("syntax", None)


# mypy


@pytest.mark.parametrize("name", ["mypy.txt", "mypy_columns.txt"])
def test_mypy_errors_with_their_notes(name):
    parsed = parse_mypy(fixture(name))
    assert parsed.summary == "Found 5 errors in 3 files (checked 4 source files)"
    assert [(f.file, f.line, f.code) for f in parsed.failures] == [
        ("pkg/notes.py", 3, "import-not-found"),
        ("pkg/notes.py", 19, "arg-type"),
        ("pkg/calc.py", 13, "return-value"),
        ("pkg/style.py", 9, "no-any-return"),
        ("pkg/style.py", 9, "name-defined"),
    ]
    arg = parsed.failures[1]
    assert arg.message.splitlines()[0] == (
        'Argument 1 to "use" has incompatible type "Bad"; expected "Greeter"'
    )
    assert "def greet(self, name: int) -> str" in arg.message
    assert {f.kind for f in parsed.failures} == {"type"}


def test_mypy_columns_and_syntax():
    columns = parse_mypy(fixture("mypy_columns.txt")).failures
    assert [f.column for f in columns] == [1, 5, 12, 5, 21]
    syntax = parse_mypy(fixture("mypy_syntax.txt")).failures
    assert [(f.line, f.kind) for f in syntax] == [(1, "syntax"), (2, "syntax")]


# JUnit XML


def test_junit_from_pytest():
    parsed = parse_junit(fixture("pytest_junit.xml"))
    assert parsed.summary == "9 tests, 6 failed or errored, 1 skipped"
    by_test = {f.test: f for f in parsed.failures}
    wrong = by_test["tests.test_calc::test_add_wrong"]
    assert (wrong.file, wrong.line, wrong.message) == ("tests/test_calc.py", 12, "assert 4 == 5")
    assert (by_test["tests.test_calc::test_ratio_zero"].file) == "pkg/calc.py"


def test_junit_collection_errors_from_pytest():
    imports, syntax = parse_junit(fixture("pytest_junit_collection.xml")).failures
    assert (imports.kind, imports.file, imports.line) == ("error", "tests/test_broken_import.py", 1)
    assert syntax.kind == "syntax"


def test_junit_from_jest_go_and_cargo_reports():
    [jest] = parse_junit(fixture("jest_junit.xml")).failures
    assert jest.test == "cart computes the total with tax"
    assert (jest.file, jest.line) == ("/home/dev/shop/src/cart.test.js", 14)
    assert jest.message.splitlines()[-1] == "Received: 12"
    [go] = parse_junit(fixture("go_junit_report.xml")).failures
    assert (go.test, go.file, go.line) == (
        "example.com/shop/pricing::TestTotal",
        "pricing_test.go",
        12,
    )
    [rust] = parse_junit(fixture("cargo2junit.xml")).failures
    assert (rust.test, rust.file, rust.line) == ("demo::tests::it_works", "src/lib.rs", 15)
    assert "assertion `left == right` failed" in rust.message


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no xml at all",
        "<testsuite><testcase name='x'><failure>",
        "<?xml version='1.0'?><testsuites><testsuite></testsuites>",
        "<!DOCTYPE x [<!ENTITY a 'aaaa'>]><testsuite>&b;</testsuite>",
    ],
)
def test_malformed_junit_is_one_error_failure(text):
    [failure] = parse_junit(text).failures
    assert failure.kind == "error" and failure.tool == "junit"


# tsc and eslint


@pytest.mark.parametrize("name", ["tsc_plain.txt", "tsc_pretty.txt"])
def test_tsc_plain_and_pretty_agree(name):
    failures = parse_tsc(fixture(name)).failures
    assert [(f.file, f.line, f.column, f.code) for f in failures] == [
        ("src/chain.ts", 3, 7, "TS2322"),
        ("src/main.ts", 3, 7, "TS2322"),
        ("src/main.ts", 6, 18, "TS2552"),
        ("src/main.ts", 9, 35, "TS2554"),
        ("src/main.ts", 9, 46, "TS2345"),
        ("src/shape.ts", 2, 20, "TS2322"),
        ("src/shape.ts", 4, 13, "TS2322"),
    ]
    # The message chain stays with its diagnostic.
    assert failures[0].message.splitlines()[-1].strip() == (
        "Type 'number' is not assignable to type 'string'."
    )
    assert {f.kind for f in failures} == {"type"}


def test_tsc_syntax_and_global_errors():
    [syntax] = parse_tsc(fixture("tsc_syntax.txt")).failures
    assert (syntax.kind, syntax.code, syntax.line) == ("syntax", "TS1109", 1)
    [config] = parse_tsc("error TS5023: Unknown compiler option 'strictt'.\n").failures
    assert (config.file, config.kind) == (None, "build")


@pytest.mark.parametrize("name", ["eslint.json", "eslint_stylish.txt"])
def test_eslint_errors_without_warnings(name):
    failures = parse_eslint(fixture(name)).failures
    assert [(Path(f.file or "").name, f.line, f.column, f.code, f.kind) for f in failures] == [
        ("app.js", 1, 7, "no-unused-vars", "lint"),
        ("app.js", 3, 9, "eqeqeq", "lint"),
        ("app.js", 4, 5, "no-undef", "lint"),
        ("app.js", 4, 17, "no-undef", "lint"),
        ("app.js", 8, 1, "no-undef", "lint"),
        ("bad.js", 2, 3, None, "syntax"),
    ]
    assert failures[0].file == "/tmp/vrec/ts/lib/app.js"


# go


def test_go_test_plain_reports_leaf_subtests_and_continuations():
    parsed = parse_go_test(fixture("go_test_plain.txt"))
    assert [(f.test, f.file, f.line) for f in parsed.failures] == [
        ("example.com/shop/pricing/TestTotal", "pricing_test.go", 12),
        ("example.com/shop/pricing/TestDiscount/zero", "pricing_test.go", 27),
        ("example.com/shop/pricing/TestDiscount/negative", "pricing_test.go", 27),
        ("example.com/shop/pricing/TestFormat", "pricing_test.go", 35),
    ]
    assert parsed.failures[0].message == "Total(2, 3) = 6, want 5"
    assert parsed.failures[3].message.splitlines() == [
        "Format mismatch:",
        '    got:  "1.50 EUR"',
        '    want: "EUR 1.50"',
    ]
    assert parsed.summary == "1 packages ok, 1 failed"


def test_go_test_panic_points_at_the_project_frame():
    [failure] = parse_go_test(fixture("go_test_panic.txt")).failures
    assert failure.test == "example.com/shop/pricing/TestAt"
    assert (failure.file, failure.line) == ("/home/dev/shop/pricing/pricing.go", 31)
    assert failure.message == "panic: runtime error: index out of range [5] with length 3"


def test_go_test_json_events():
    parsed = parse_go_test(fixture("go_test.jsonl"))
    assert [(f.test, f.file, f.line, f.message) for f in parsed.failures] == [
        ("example.com/shop/pricing/TestTotal", "pricing_test.go", 12, "Total(2, 3) = 6, want 5"),
        (
            "example.com/shop/pricing/TestDiscount/zero",
            "pricing_test.go",
            27,
            "Discount(0) = 1, want 0",
        ),
    ]


@pytest.mark.parametrize(
    "name", ["go_test_build.jsonl", "go_test_build_stderr.jsonl", "go_test_build_plain.txt"]
)
def test_go_build_failures(name):
    failures = parse_go_test(fixture(name)).failures
    assert failures[0] == Failure(
        file="pricing.go", line=8, column=9, message="undefined: discount", kind="build", tool="go"
    )


def test_go_vet():
    findings = parse_go_vet(fixture("go_vet.txt")).failures
    assert [(f.file, f.line, f.column, f.kind) for f in findings] == [
        ("pricing.go", 22, 2, "lint"),
        ("pricing.go", 40, 3, "lint"),
    ]
    [typecheck] = parse_go_vet(fixture("go_vet_typecheck.txt")).failures
    assert (typecheck.kind, typecheck.message) == ("build", "undefined: discount")


# cargo


@pytest.mark.parametrize("name", ["cargo_check.jsonl", "cargo_check_human.txt"])
def test_cargo_compiler_errors(name):
    failures = parse_cargo(fixture(name)).failures
    assert [(f.file, f.line, f.column, f.code, f.kind) for f in failures] == [
        ("src/lib.rs", 6, 18, "E0308", "build"),
        ("src/lib.rs", 8, 5, "E0425", "build"),
    ]
    assert failures[0].message.splitlines()[:2] == [
        "mismatched types",
        "expected `i32`, found `&str`",
    ]


def test_cargo_json_leaves_out_warnings_and_keeps_help():
    [failure] = parse_cargo(fixture("cargo_check_borrow.jsonl")).failures
    assert (failure.code, failure.line) == ("E0382", 9)
    assert "help: consider cloning the value" in failure.message


@pytest.mark.parametrize("name", ["cargo_test.txt", "cargo_test_backtrace.txt"])
def test_cargo_test_panics(name):
    parsed = parse_cargo(fixture(name))
    assert parsed.summary == "1 passed, 3 failed"
    assert [(f.test, f.file, f.line, f.column) for f in parsed.failures] == [
        ("tests::divides_by_zero", "src/lib.rs", 6, 5),
        ("tests::explicit_panic", "src/lib.rs", 31, 9),
        ("tests::it_works", "src/lib.rs", 15, 9),
    ]
    assert parsed.failures[1].message == "something went wrong\nacross two lines"
    assert parsed.failures[2].message.splitlines() == [
        "assertion `left == right` failed",
        "  left: 4",
        " right: 5",
    ]


def test_cargo_old_panic_format():
    output = (
        "---- tests::it_works stdout ----\n"
        "thread 'tests::it_works' panicked at 'assertion failed: `(left == right)`', "
        "src/lib.rs:10:9\n\nfailures:\n    tests::it_works\n\n"
    )
    [failure] = parse_cargo(output).failures
    assert (failure.file, failure.line, failure.message) == (
        "src/lib.rs",
        10,
        "assertion failed: `(left == right)`",
    )


# Garbage never raises

GARBAGE = [
    "",
    "\x00\x01\x02",
    "[" * 50_000,
    "{" * 50_000 + "\n",
    '[{"location": {"row": "x"}, "filename": 3}, 1, null]',
    '{"reason": "compiler-message", "message": {"level": "error", "spans": [1, {"is_primary": 1}]}}',  # noqa: E501
    '{"Action": "fail", "Test": 5, "Package": []}\n{"Action": "output", "Output": null}',
    "a.py:" + "9" * 5000 + ": error: x  [y]\n" + "f.go:" + "9" * 5000 + ":1: z",
    "=" * 80 + "\nFAIL: t (m)\n" + "-" * 80,
    "__________ t __________\nE\n" * 3,
    "<testsuite><testcase name='a'><failure message='m'/></testcase></testsuite>",
    "---- x stdout ----\nthread 'x' panicked at :::\n",
    "error[E1]: x\n --> :0:0\n",
    "\n".join(["  |  ^^^ label"] * 10),
]


@pytest.mark.parametrize("name", sorted(PARSERS))
@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_survive_known_garbage(name, text):
    assert isinstance(PARSERS[name](text), Parsed)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parsers_survive_random_bytes_and_cut_fixtures(name):
    rng = random.Random(name)
    samples = [bytes(rng.randrange(256) for _ in range(2000)).decode("utf-8", "replace")]
    for path in sorted(FIXTURES.glob("*.*")):
        text = path.read_text(encoding="utf-8", errors="replace")
        samples.append(text[: rng.randrange(len(text) + 1)])
        samples.append(text[rng.randrange(len(text) + 1) :])
        lines = text.splitlines(keepends=True)
        rng.shuffle(lines)
        samples.append("".join(lines))
    for sample in samples:
        assert isinstance(PARSERS[name](sample), Parsed)


ALPHABET = "abE:1 \n\t/.-_[]{}()=<>\"'|^~FAILEDRORok"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(ALPHABET)), max_size=400))
def test_parsers_survive_generated_text(text):
    for parser in PARSERS.values():
        assert isinstance(parser(text), Parsed)


def test_parse_output_turns_a_parser_bug_into_an_error_failure():
    def broken(output: str) -> Parsed:
        raise KeyError("boom")

    [failure] = parse_output("mine", "some\noutput", tool="mine", parsers={"mine": broken}).failures
    assert failure.kind == "error" and failure.tool == "mine"
    assert "KeyError" in failure.message and failure.message.endswith("some\noutput")
    [unknown] = parse_output("nope", "").failures
    assert unknown.kind == "error"


@pytest.mark.parametrize("suffix", sorted(GRAMMARS))
def test_the_syntax_check_survives_garbage(suffix):
    rng = random.Random(suffix)
    data = bytes(rng.randrange(256) for _ in range(3000))
    found = syntax_failures(f"x{suffix}", data + b"(" * 5000)
    assert found is not None and 0 < len(found) <= 5
    assert all(f.kind == "syntax" and f.line is not None for f in found)
    assert syntax_failures("notes.txt", data) is None
