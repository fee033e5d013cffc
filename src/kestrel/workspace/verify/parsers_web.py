"""Parsers for the TypeScript compiler (`tsc`) and ESLint."""

from __future__ import annotations

import re
from dataclasses import replace

from kestrel.workspace.verify._text import json_array, strip_ansi, to_int, to_str
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed

_TSC_PAREN = re.compile(
    r"^(?P<file>[^\s(][^(\n]*?)\((?P<line>\d+),(?P<col>\d+)\): "
    r"(?P<severity>error|warning) (?P<code>TS\d+): (?P<message>.*)$"
)
_TSC_PRETTY = re.compile(
    r"^(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?P<col>\d+) - "
    r"(?P<severity>error|warning) (?P<code>TS\d+): (?P<message>.*)$"
)
_TSC_GLOBAL = re.compile(r"^(?P<severity>error|warning) (?P<code>TS\d+): (?P<message>.*)$")
_TSC_TOTALS = re.compile(r"^(Found \d+ errors?.*)$")
# The scanner and parser report codes up to TS1161; later TS1xxx codes come from the checker.
_LAST_SYNTAX_CODE = 1161


def parse_tsc(output: str) -> Parsed:
    """`tsc` diagnostics in the plain `file(line,col): error TS…` or `--pretty` form."""
    failures: list[Failure] = []
    continuing = False
    totals = ""
    for line in strip_ansi(output).splitlines():
        match = _TSC_PAREN.match(line) or _TSC_PRETTY.match(line) or _TSC_GLOBAL.match(line)
        if match is not None:
            continuing = match["severity"] == "error"
            if continuing:
                failures.append(_tsc_failure(match))
        elif continuing and line.startswith("  ") and line.strip():
            # An indented line right after a diagnostic continues its message chain.
            last = failures[-1]
            failures[-1] = replace(last, message=f"{last.message}\n{line.rstrip()}")
        else:
            continuing = False
            if totals_match := _TSC_TOTALS.match(line):
                totals = totals_match.group(1)
    return Parsed(tuple(failures), totals or (f"{len(failures)} errors" if failures else ""))


def _tsc_failure(match: re.Match[str]) -> Failure:
    groups = match.groupdict()
    code = match["code"]
    number = to_int(code[2:]) or 0
    kind: FailureKind = "syntax" if number <= _LAST_SYNTAX_CODE else "type"
    if groups.get("file") is None:
        kind = "build"  # a project-wide problem: bad tsconfig, no inputs
    return Failure(
        file=groups.get("file"),
        line=to_int(groups.get("line")),
        column=to_int(groups.get("col")),
        message=match["message"],
        kind=kind,
        tool="tsc",
        code=code,
    )


_STYLISH = re.compile(r"^\s+(\d+):(\d+)\s+(error|warning)\s+(.*?)\s*$")
_STYLISH_RULE = re.compile(r"^(.*?)\s{2,}(\S+)$")
_STYLISH_TOTALS = re.compile(r"^\s*[✖✕x] (\d+ problems? .*)$")


def parse_eslint(output: str) -> Parsed:
    """ESLint errors (warnings are left out) from `-f json` or the default stylish format."""
    text = strip_ansi(output)
    report = json_array(text)
    if report is not None:
        failures = [f for entry in report for f in _eslint_json_file(entry)]
        return Parsed(tuple(failures), f"{len(failures)} errors" if failures else "")
    return _eslint_stylish(text)


def _eslint_json_file(entry: object) -> list[Failure]:
    if not isinstance(entry, dict):
        return []
    file = to_str(entry.get("filePath"))
    messages = entry.get("messages")
    failures: list[Failure] = []
    for item in messages if isinstance(messages, list) else []:
        if not isinstance(item, dict) or item.get("severity") != 2:
            continue
        fatal = item.get("fatal") is True
        failures.append(
            Failure(
                file=file,
                line=to_int(item.get("line")),
                column=to_int(item.get("column")),
                message=to_str(item.get("message")) or "(no message)",
                kind="syntax" if fatal else "lint",
                tool="eslint",
                code=to_str(item.get("ruleId")),
            )
        )
    return failures


def _eslint_stylish(text: str) -> Parsed:
    failures: list[Failure] = []
    file: str | None = None
    totals = ""
    for line in text.splitlines():
        if totals_match := _STYLISH_TOTALS.match(line):
            totals = totals_match.group(1)
        elif match := _STYLISH.match(line):
            if match.group(3) != "error":
                continue
            rest = match.group(4)
            ruled = _STYLISH_RULE.match(rest)
            message, rule = (ruled.group(1), ruled.group(2)) if ruled else (rest, None)
            parse_error = message.startswith("Parsing error")
            failures.append(
                Failure(
                    file=file,
                    line=to_int(match.group(1)),
                    column=to_int(match.group(2)),
                    message=message,
                    kind="syntax" if parse_error else "lint",
                    tool="eslint",
                    code=rule,
                )
            )
        elif line.strip() and not line[0].isspace():
            file = line.strip()
    return Parsed(tuple(failures), totals)
