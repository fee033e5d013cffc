"""Parsers for `go test` (plain and `-json`) and `go vet`, including build failures."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kestrel.workspace.verify._text import is_library_path, json_lines, strip_ansi, to_int, to_str
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed

_FAIL = re.compile(r"^(\s*)--- FAIL: (\S+) \(")
_RUN = re.compile(r"^=== (?:RUN|CONT|NAME)\s+(\S+)")
_MESSAGE = re.compile(r"^(\s+)([\w./-]+\.go):(\d+): ?(.*)$")
_BUILD = re.compile(r"^(?:vet: )?((?:\.{1,2}/)?[^\s:]+\.go):(\d+):(\d+): (.*)$")
_PANIC_FRAME = re.compile(r"^\t(\S+\.go):(\d+)")
_PACKAGE_FAIL = re.compile(r"^FAIL\t(\S+)")
_RUNTIME_PARTS = ("/src/runtime/", "/src/testing/", "/pkg/mod/")


@dataclass(slots=True)
class _Test:
    """What one failing test printed: its located messages and any panic."""

    name: str
    package: str = ""
    lines: list[str] = field(default_factory=list)


def parse_go_test(output: str) -> Parsed:
    """Failing tests and build errors from `go test`, with or without `-json`."""
    events = [event for event in json_lines(output) if "Action" in event]
    if events:
        return _from_events(events, output)
    tests, builds = _scan_plain(strip_ansi(output).splitlines())
    failures = [_test_failure(test) for test in _leaves(tests)] + builds
    return Parsed(tuple(failures), _plain_totals(output))


def parse_go_vet(output: str) -> Parsed:
    """`go vet` findings (`file.go:line:col: message`); type errors it hits are build failures."""
    failures: list[Failure] = []
    for line in strip_ansi(output).splitlines():
        if match := _BUILD.match(line):
            kind: FailureKind = "build" if line.startswith("vet: ") else "lint"
            failures.append(_build_failure(match, kind, "go vet"))
    return Parsed(tuple(failures), f"{len(failures)} findings" if failures else "")


def _build_failure(match: re.Match[str], kind: FailureKind, tool: str) -> Failure:
    file, line, column, message = match.groups()
    return Failure(
        file=file.removeprefix("./"),
        line=to_int(line),
        column=to_int(column),
        message=message,
        kind=kind,
        tool=tool,
    )


def _scan_plain(lines: Iterable[str]) -> tuple[list[_Test], list[Failure]]:
    tests: dict[str, _Test] = {}
    failed: list[_Test] = []
    builds: list[Failure] = []
    current: _Test | None = None
    for line in lines:
        if match := _FAIL.match(line):
            current = tests.setdefault(match.group(2), _Test(match.group(2)))
            failed.append(current)
        elif match := _RUN.match(line):
            current = tests.setdefault(match.group(1), _Test(match.group(1)))
        elif match := _BUILD.match(line):
            builds.append(_build_failure(match, "build", "go"))
        elif match := _PACKAGE_FAIL.match(line):
            for test in failed:
                test.package = test.package or match.group(1)
        elif current is not None:
            current.lines.append(line)
    return failed, builds


def _leaves(tests: Sequence[_Test]) -> list[_Test]:
    # A failed subtest fails its parent too; report the parent only for its own messages.
    names = {test.name for test in tests}
    leaves = []
    for test in tests:
        has_child = any(other.startswith(test.name + "/") for other in names)
        if not has_child or any(_MESSAGE.match(line) for line in test.lines):
            leaves.append(test)
    return leaves


def _test_failure(test: _Test) -> Failure:
    messages, file, number = _messages(test.lines)
    panic = _panic(test.lines)
    if panic is not None:
        messages.append(panic[0])
        if file is None:
            file, number = panic[1], panic[2]
    test_id = f"{test.package}/{test.name}" if test.package else test.name
    message = "\n".join(messages) or "failed"
    return Failure(file=file, line=number, test=test_id, message=message, kind="test", tool="go")


def _messages(lines: Sequence[str]) -> tuple[list[str], str | None, int | None]:
    """`t.Error` messages (with continuation lines) and the first message's location."""
    messages: list[str] = []
    file: str | None = None
    number: int | None = None
    indent: int | None = None
    for line in lines:
        match = _MESSAGE.match(line)
        if match is not None and not match.group(2).startswith("/"):
            indent = len(match.group(1))
            if file is None:
                file, number = match.group(2), to_int(match.group(3))
                messages.append(match.group(4))
            else:
                messages.append(f"{match.group(2)}:{match.group(3)}: {match.group(4)}")
        elif indent is not None and line.startswith(" " * (indent + 1)) and line.strip():
            messages.append("    " + line.strip())
        else:
            indent = None
    return messages, file, number


def _panic(lines: Sequence[str]) -> tuple[str, str | None, int | None] | None:
    start = next((i for i, line in enumerate(lines) if line.startswith("panic: ")), None)
    if start is None:
        return None
    text = lines[start].removesuffix(" [recovered]")
    for line in lines[start:]:
        match = _PANIC_FRAME.match(line)
        path = match.group(1) if match else ""
        if match and not is_library_path(path) and not any(p in path for p in _RUNTIME_PARTS):
            return text, path, to_int(match.group(2))
    return text, None, None


def _plain_totals(output: str) -> str:
    results = re.findall(r"^(ok|FAIL)\s+(\S+)", output, re.MULTILINE)
    passed = sum(1 for outcome, _ in results if outcome == "ok")
    failed = len(results) - passed
    return f"{passed} packages ok, {failed} failed" if results else ""


def _from_events(events: list[dict[str, object]], output: str) -> Parsed:
    outputs: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
    failed: list[tuple[str, str]] = []
    passed = 0
    builds: list[str] = []
    for event in events:
        action, package = event.get("Action"), to_str(event.get("Package")) or ""
        test, text = to_str(event.get("Test")), event.get("Output")
        if isinstance(text, str):
            (builds if action == "build-output" else outputs[(package, test or "")]).append(text)
        if test and action == "fail":
            failed.append((package, test))
        passed += bool(test and action == "pass")
    # Before Go 1.24 build errors went to stderr as plain text, interleaved with the events.
    plain = [line for line in output.splitlines() if not line.lstrip().startswith("{")]
    lines = [piece.rstrip("\n") for piece in builds] + plain
    build_failures = [
        _build_failure(match, "build", "go") for line in lines if (match := _BUILD.match(line))
    ]
    tests = [
        _Test(name, package, "".join(outputs[(package, name)]).splitlines())
        for package, name in failed
    ]
    failures = [_test_failure(test) for test in _leaves(tests)] + build_failures
    summary = f"{passed} passed, {len(failed)} failed" if passed or failed else ""
    return Parsed(tuple(failures), summary or ("build failed" if build_failures else ""))
