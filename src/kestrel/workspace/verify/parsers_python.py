"""Parsers for Python tools: unittest, ruff and mypy (pytest's is in `parsers_pytest`)."""

from __future__ import annotations

import re
from dataclasses import replace

from kestrel.workspace.verify._text import is_library_path, json_array, strip_ansi, to_int, to_str
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed
from kestrel.workspace.verify.parsers_pytest import parse_pytest, read_traceback

__all__ = ["parse_mypy", "parse_pytest", "parse_ruff", "parse_unittest", "read_traceback"]

_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]*)\)(.*)$")
_UNITTEST_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_RULE = re.compile(r"^(=|-){20,}$")
_UNITTEST_TOTALS = re.compile(r"^(Ran \d+ tests? in .*|FAILED \(.*\)|OK(?: \(.*\))?)$")


def parse_unittest(output: str) -> Parsed:
    """Failures from `python -m unittest`: `FAIL:`/`ERROR:` blocks with their tracebacks."""
    failures: list[Failure] = []
    head: re.Match[str] | None = None
    body: list[str] = []
    totals: list[str] = []
    for line in strip_ansi(output).splitlines():
        if _RULE.match(line) and line.startswith("="):
            if head is not None:
                failures.append(_unittest_failure(head, body))
            head, body = None, []
        elif head is None and (match := _UNITTEST_HEAD.match(line)):
            head = match
        elif _UNITTEST_TOTALS.match(line):
            totals.append(line.strip())
        elif head is not None:
            body.append(line)
    if head is not None:
        failures.append(_unittest_failure(head, body))
    return Parsed(tuple(failures), "; ".join(totals))


def _unittest_failure(head: re.Match[str], body: list[str]) -> Failure:
    outcome, name, where, extra = head.groups()
    test = where if where.endswith(f".{name}") else f"{where}.{name}"
    if extra.strip():
        test = f"{test} {extra.strip()}"
    # A docstring line may precede the dashed rule; the traceback ends at the next rule.
    rules = [index for index, line in enumerate(body) if _RULE.match(line)]
    if rules:
        body = body[rules[0] + 1 : rules[1] if len(rules) > 1 else len(body)]
    frames: list[tuple[str, int, int]] = []
    for index, line in enumerate(body):
        match = _UNITTEST_FRAME.match(line)
        number = to_int(match.group(2)) if match else None
        if match and number is not None:
            frames.append((match.group(1), number, index))
    start = frames[-1][2] + 1 if frames else 0
    rest = body[start:]
    # Skip the frame's indented source line and caret markers; the exception starts at column 0.
    first = next((i for i, line in enumerate(rest) if line and not line[0].isspace()), len(rest))
    message = "\n".join(rest[first:]).strip() or outcome.lower()
    chosen = next((f for f in reversed(frames) if not is_library_path(f[0])), None)
    kind: FailureKind = "error" if "_FailedTest" in where else "test"
    return Failure(
        file=chosen[0] if chosen else None,
        line=chosen[1] if chosen else None,
        test=test,
        message=message,
        kind=kind,
        tool="unittest",
    )


_RUFF_CONCISE = re.compile(r"^([^\s:][^:\n]*):(\d+):(\d+): (.*)$")
_RUFF_CODE = re.compile(r"^([A-Z]+[0-9]+|[a-z][a-z0-9]*(?:-[a-z0-9]+)+):? (?:\[\*\] )?(.*)$")
_ARROW = re.compile(r"^\s*--> (.+?):(\d+):(\d+)\s*$")


def parse_ruff(output: str) -> Parsed:
    """Ruff's diagnostics from `--output-format=json`, `concise` or the default `full` text."""
    text = strip_ansi(output)
    items = json_array(text)
    if items is not None:
        failures = [f for item in items if (f := _ruff_json(item)) is not None]
    else:
        failures = _ruff_text(text.splitlines())
    return Parsed(tuple(failures), f"{len(failures)} problems" if failures else "")


def _ruff_kind(code: str | None, message: str) -> FailureKind:
    # Ruff before 0.9 reported parse errors as E999 or with no code and a "SyntaxError:" text.
    if code in ("invalid-syntax", "E999") or (code is None and message.startswith("SyntaxError")):
        return "syntax"
    return "lint"


def _ruff_json(item: object) -> Failure | None:
    if not isinstance(item, dict):
        return None
    message = to_str(item.get("message")) or "(no message)"
    code = to_str(item.get("code"))
    location = item.get("location")
    row = column = None
    if isinstance(location, dict):
        row, column = to_int(location.get("row")), to_int(location.get("column"))
    return Failure(
        file=to_str(item.get("filename")),
        line=row,
        column=column,
        message=message,
        kind=_ruff_kind(code, message),
        tool="ruff",
        code=code,
    )


def _ruff_text(lines: list[str]) -> list[Failure]:
    failures: list[Failure] = []
    header: re.Match[str] | None = None
    for line in lines:
        if match := _RUFF_CONCISE.match(line):
            file, row, column, rest = match.groups()
            coded = _RUFF_CODE.match(rest)
            code, message = (coded.group(1), coded.group(2)) if coded else (None, rest)
            failures.append(_ruff_failure(file, row, column, code, message))
        elif header is not None and (arrow := _ARROW.match(line)):
            file, row, column = arrow.groups()
            failures.append(_ruff_failure(file, row, column, header.group(1), header.group(2)))
            header = None
        else:
            header = _RUFF_CODE.match(line) if line[:1].strip() else None
    return failures


def _ruff_failure(file: str, row: str, column: str, code: str | None, message: str) -> Failure:
    return Failure(
        file=file,
        line=to_int(row),
        column=to_int(column),
        message=message,
        kind=_ruff_kind(code, message),
        tool="ruff",
        code=code,
    )


_MYPY = re.compile(
    r"^(?P<file>[^\s:][^:\n]*?):(?:(?P<line>\d+):)?(?:(?P<col>\d+):)?(?:\d+:\d+:)? "
    r"(?P<severity>error|note|warning): (?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)
_MYPY_TOTALS = re.compile(r"^(Found \d+ errors? in .*|Success: .*)$")


def parse_mypy(output: str) -> Parsed:
    """Mypy's `path:line[:col]: error: message  [code]` lines; notes join their error."""
    failures: list[Failure] = []
    totals = ""
    for line in strip_ansi(output).splitlines():
        if match := _MYPY_TOTALS.match(line):
            totals = match.group(1)
            continue
        match = _MYPY.match(line)
        if match is None:
            continue
        file, number = match["file"], to_int(match["line"])
        if match["severity"] == "note":
            last = failures[-1] if failures else None
            if last is not None and (last.file, last.line) == (file, number):
                failures[-1] = _with_note(last, match["message"])
            continue
        code = match["code"]
        failures.append(
            Failure(
                file=file,
                line=number,
                column=to_int(match["col"]),
                message=match["message"],
                kind="syntax" if code == "syntax" else "type",
                tool="mypy",
                code=code,
            )
        )
    return Parsed(tuple(failures), totals)


def _with_note(failure: Failure, note: str) -> Failure:
    return replace(failure, message=f"{failure.message}\n{note}")
