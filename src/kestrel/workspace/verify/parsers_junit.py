"""A parser for JUnit XML reports: pytest `--junitxml`, jest-junit, go-junit-report, cargo2junit."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from kestrel.workspace.verify._text import is_library_path, to_int
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed
from kestrel.workspace.verify.parsers_python import read_traceback

_START = re.compile(r"<\?xml|<testsuites?\b")
_ENDS = ("</testsuites>", "</testsuite>")
# Locations as each ecosystem writes them, most specific first.
_RUST_PANIC = re.compile(r"panicked at ([^\s:'][^:\n]*):(\d+):(\d+)")
_GO_LINE = re.compile(r"^\s+([\w./-]+\.go):(\d+): ", re.MULTILINE)
_PY_FILE = re.compile(r'File "([^"]+)", line (\d+)')
_JS_FRAME = re.compile(r"at (?:.*? \()?([^\s()]+?):(\d+):(\d+)\)?$", re.MULTILINE)
_STACK_LINE = re.compile(r"^\s+at \S")
_GENERIC_MESSAGES = frozenset({"", "failed", "failure", "error", "test failed"})


def parse_junit(output: str) -> Parsed:
    """Failures and errors of every `testcase` in a JUnit XML report.

    Malformed or missing XML becomes one `error` failure: a report that cannot be read must not
    pass for a clean run.
    """
    document = _document(output)
    if document is None:
        return Parsed((_broken("no JUnit XML report found in the output"),))
    try:
        # The report comes from a test runner in the workspace; expat (2.4.1 and later, bundled
        # with every supported Python) refuses entity-expansion bombs.
        root = ET.fromstring(document)  # noqa: S314
    except (ET.ParseError, ValueError) as exc:
        return Parsed((_broken(f"malformed JUnit XML report: {exc}"),))
    failures: list[Failure] = []
    total = skipped = 0
    for case in root.iter("testcase"):
        total += 1
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        if problem is not None:
            failures.append(_case_failure(case, problem))
        elif any(c.tag == "skipped" for c in case):
            skipped += 1
    for suite in root.iter("testsuite"):
        for problem in suite:
            if problem.tag in ("failure", "error"):
                failures.append(_suite_failure(suite, problem))
    summary = f"{total} tests, {len(failures)} failed or errored, {skipped} skipped"
    return Parsed(tuple(failures), summary)


def _document(output: str) -> str | None:
    start = _START.search(output)
    if start is None:
        return None
    end = max(output.rfind(tag) + len(tag) if tag in output else -1 for tag in _ENDS)
    return output[start.start() : end] if end > start.start() else output[start.start() :]


def _broken(message: str) -> Failure:
    return Failure(message=message, kind="error", tool="junit")


def _case_failure(case: ET.Element, problem: ET.Element) -> Failure:
    name = case.get("name") or "(unnamed)"
    classname = case.get("classname") or ""
    test = name if not classname or name.startswith(classname) else f"{classname}::{name}"
    body = (problem.text or "").strip()
    message, file, line = _message_and_place(problem.get("message") or "", body)
    if case.get("file"):
        file, line = case.get("file"), to_int(case.get("line")) or line
    kind: FailureKind = "test"
    if "collection" in (problem.get("message") or "") or (not classname and problem.tag == "error"):
        kind = "syntax" if "SyntaxError" in body else "error"
    return Failure(file=file, line=line, test=test, message=message, kind=kind, tool="junit")


def _suite_failure(suite: ET.Element, problem: ET.Element) -> Failure:
    body = (problem.text or "").strip()
    message, file, line = _message_and_place(problem.get("message") or "", body)
    name = suite.get("name")
    return Failure(file=file, line=line, test=name, message=message, kind="error", tool="junit")


def _message_and_place(attribute: str, body: str) -> tuple[str, str | None, int | None]:
    pytest_message, file, line = read_traceback(body.splitlines())
    if file is None:
        file, line = _place(body)
    if pytest_message:
        return pytest_message, file, line
    generic = attribute.strip().lower()
    # go-junit-report says "Failed", cargo2junit "failed <name>": the body says more.
    if generic not in _GENERIC_MESSAGES and not generic.startswith("failed "):
        return attribute.strip(), file, line
    # Stack frames say where, which `file` and `line` already hold; the message is the rest.
    lines = [line for line in body.splitlines() if not _STACK_LINE.match(line)]
    return "\n".join(lines).strip() or attribute or "failed", file, line


def _place(body: str) -> tuple[str | None, int | None]:
    for pattern in (_RUST_PANIC, _GO_LINE, _PY_FILE):
        found = [m for m in pattern.finditer(body) if not is_library_path(m.group(1))]
        if found:
            match = found[-1] if pattern is _PY_FILE else found[0]
            return match.group(1), to_int(match.group(2))
    for match in _JS_FRAME.finditer(body):
        if "node_modules" not in match.group(1) and not match.group(1).startswith("node:"):
            return match.group(1), to_int(match.group(2))
    return None, None
