"""Parsers for Python tools: pytest's terminal output, unittest, ruff and mypy."""

from __future__ import annotations

import re
import textwrap
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kestrel.workspace.verify._text import is_library_path, json_array, strip_ansi, to_int, to_str
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed

_SECTION = re.compile(r"^={3,} (.+?) ={3,}$")
_BLOCK = re.compile(r"^_{3,} (.+?) _{3,}$")
_CAPTURED = re.compile(r"^-{3,} (Captured|Stored) .* -{3,}$")
_FRAME = re.compile(r"^([^\s<>][^:\n]*?):(\d+): (.*)$")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_SHORT = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - (.*))?$")
_PYTEST_TOTALS = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|skipped|errors?|deselected|xfailed|xpassed|warnings?|"
    r"rerun)(?:, )?)+ in [\d.]+s.*?|no tests ran in [\d.]+s.*?)\s*=*$"
)
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
_REPORT_SECTIONS = frozenset({"errors", "failures", "passes", "warnings summary"})


@dataclass(slots=True)
class _Block:
    title: str
    lines: list[str] = field(default_factory=list)


def parse_pytest(output: str) -> Parsed:
    """Failures and errors from pytest's terminal output (any `--tb` style, `-q`, `-rA`)."""
    blocks: list[_Block] = []
    summary_lines: list[tuple[str, str, str]] = []
    problems: list[Failure] = []
    totals = ""
    section = ""
    for line in strip_ansi(output).splitlines():
        if match := _PYTEST_TOTALS.match(line):
            totals = match.group(1)
        elif match := _SECTION.match(line):
            section = match.group(1).strip().lower()
        elif section in ("errors", "failures") and (match := _BLOCK.match(line)):
            blocks.append(_Block(match.group(1).strip()))
        elif section == "short test summary info" and (match := _SHORT.match(line)):
            summary_lines.append((match.group(1), match.group(2), match.group(3) or ""))
        elif line.startswith("INTERNALERROR>") or (
            # Inside a report section the same words may be a test's own captured output.
            line.startswith("ERROR: ") and section not in _REPORT_SECTIONS
        ):
            problems.append(Failure(message=line, kind="error", tool="pytest"))
        elif section in ("errors", "failures") and blocks:
            blocks[-1].lines.append(line)
    failures = _match_blocks(blocks, summary_lines)
    return Parsed(tuple(failures + _internal_errors(problems)), totals)


def _internal_errors(problems: list[Failure]) -> list[Failure]:
    # An internal error prints one traceback line per output line: keep them as one failure.
    inner = [p.message for p in problems if p.message.startswith("INTERNALERROR>")]
    rest = [p for p in problems if not p.message.startswith("INTERNALERROR>")]
    if inner:
        text = "\n".join(line.removeprefix("INTERNALERROR>") for line in inner[-12:])
        rest.append(Failure(message=f"pytest internal error:\n{text}", kind="error", tool="pytest"))
    return rest


def _block_key(title: str) -> str:
    for prefix in ("ERROR at setup of ", "ERROR at teardown of ", "ERROR at call of "):
        title = title.removeprefix(prefix)
    return title.removeprefix("ERROR collecting ")


def _node_key(node: str) -> str:
    if "::" not in node:
        return node
    return node.split("::", 1)[1].replace("::", ".")


def _match_blocks(blocks: list[_Block], summary: list[tuple[str, str, str]]) -> list[Failure]:
    # Blocks are titled by test name only; the short summary names the node id. Pair them in
    # order, by key, so two files' `test_x` each get their own node id.
    pending: defaultdict[str, deque[_Block]] = defaultdict(deque)
    for block in blocks:
        pending[_block_key(block.title)].append(block)
    failures: list[Failure] = []
    for _outcome, node, short in summary:
        queue = pending.get(_node_key(node))
        failures.append(_block_failure(queue.popleft() if queue else None, node, short))
    for queue in pending.values():
        failures.extend(_block_failure(left, _block_key(left.title)) for left in queue)
    return failures


def _block_failure(block: _Block | None, node: str, short: str = "") -> Failure:
    collecting = "::" not in node and node.endswith(".py")
    lines = block.lines if block is not None else []
    message, file, line = read_traceback(lines)
    message = message or short or ("collection failed" if collecting else "failed")
    kind: FailureKind = "test"
    if collecting:
        syntax = any(name in message for name in _SYNTAX_ERRORS)
        kind = "syntax" if syntax else "error"
    if file is None and (collecting or "::" in node):
        file = node.split("::", 1)[0]
    if block is not None and block.title.startswith("ERROR at "):
        message = f"{block.title.split(' of ', 1)[0].removeprefix('ERROR ')}: {message}"
    test = None if collecting else node
    return Failure(file=file, line=line, test=test, message=message, kind=kind, tool="pytest")


def read_traceback(lines: Sequence[str]) -> tuple[str, str | None, int | None]:
    """The final exception's `E` lines and the deepest project frame of one failure block."""
    groups: list[list[str]] = []
    frames: list[tuple[str, int]] = []
    previous_e = False
    for line in lines:
        if _CAPTURED.match(line):
            break
        is_e = line == "E" or line.startswith("E ")
        if is_e:
            if not previous_e:
                groups.append([])
            groups[-1].append(line[1:])
        elif (match := _FRAME.match(line)) and (number := to_int(match.group(2))) is not None:
            frames.append((match.group(1), number))
        previous_e = is_e
    message = textwrap.dedent("\n".join(groups[-1])).strip() if groups else ""
    # A syntax error names the broken file itself; the frames are only the importer's.
    located = _FILE_LINE.search(message) if any(n in message for n in _SYNTAX_ERRORS) else None
    if located:
        return message, located.group(1), to_int(located.group(2))
    chosen = next((f for f in reversed(frames) if not is_library_path(f[0])), None)
    if chosen is None and frames:
        chosen = frames[-1]
    return (message, chosen[0], chosen[1]) if chosen else (message, None, None)


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
