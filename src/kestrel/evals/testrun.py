"""Giving test ids to a runner, and reading from its output which of them passed.

Two id forms are understood, as SWE-bench files use them:

- pytest node ids (`tests/test_x.py::test_y`), read from the `-rA` summary, which lists every
  test as `PASSED id`, `FAILED id - reason`, `ERROR id` and so on;
- unittest ids (`test_y (package.module.Class)`), given to the runner as the dotted name
  `package.module.Class.test_y` and read from its verbose output (`test_y (...) ... ok`).

A test the output does not report as passed did not pass: it counts as failed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Literal

TestOutcome = Literal["pass", "fail"]

_PYTEST = re.compile(
    r"^(PASSED|FAILED|ERROR|XPASS|XFAIL|SKIPPED)\s+(?:\[\d+\]\s+)?(.+?)(?:\s+-\s.*)?$"
)
_PYTEST_GOOD = frozenset({"PASSED", "XPASS"})
_UNITTEST_ID = re.compile(r"^(\w+) \(([\w.]+)\)$")
_UNITTEST_HEAD = re.compile(r"^(\w+) \(([\w.]+)\)")
_UNITTEST_END = re.compile(r" \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)")
_UNITTEST_GOOD = frozenset({"ok", "unexpected success"})


def command_for(test_cmd: str, tests: Sequence[str]) -> str:
    """The shell command that runs `tests` (each quoted, in the runner's form) with `test_cmd`."""
    return " ".join([test_cmd, *(shlex.quote(_argument(t)) for t in tests)])


def _argument(test: str) -> str:
    match = _UNITTEST_ID.match(test)
    if match is None:
        return test
    name, where = match.groups()
    return where if where.endswith("." + name) else f"{where}.{name}"


def outcomes(output: str, tests: Sequence[str]) -> dict[str, TestOutcome]:
    """Each wanted test's outcome, read from the runner's output."""
    passed = _pytest_passed(output) | _unittest_passed(output)
    return {test: "pass" if test in passed else "fail" for test in tests}


def _pytest_passed(output: str) -> set[str]:
    seen: dict[str, str] = {}
    for line in output.splitlines():
        match = _PYTEST.match(line.strip())
        if match:
            seen.setdefault(match.group(2).strip(), match.group(1))
    return {test for test, status in seen.items() if status in _PYTEST_GOOD}


def _unittest_passed(output: str) -> set[str]:
    """Ids of the tests unittest's verbose output reports as passed.

    A test's line starts with `name (module.Class)` (Python 3.11 adds `.name` inside the
    brackets); a docstring may push ` ... ok` onto a later line.
    """
    passed: set[str] = set()
    failed: set[str] = set()
    current: str | None = None
    for line in output.splitlines():
        head = _UNITTEST_HEAD.match(line)
        if head:
            name, where = head.groups()
            where = where.removesuffix("." + name)
            current = f"{name} ({where})"
        end = _UNITTEST_END.search(line)
        if end and current is not None:
            (passed if end.group(1) in _UNITTEST_GOOD else failed).add(current)
            current = None
    return passed - failed


def all_pass(results: Mapping[str, TestOutcome]) -> bool:
    """Whether there were tests and every one passed."""
    return bool(results) and all(v == "pass" for v in results.values())
