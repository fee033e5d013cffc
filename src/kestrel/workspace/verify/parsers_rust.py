"""A parser for cargo: `--message-format=json` diagnostics, human diagnostics and test panics."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kestrel.workspace.verify._text import json_lines, strip_ansi, to_int, to_str
from kestrel.workspace.verify.failures import Failure, Parsed

_HEADLINE = re.compile(r"^(error|warning)(?:\[(\w+)\])?: (.*)$")
_ARROW = re.compile(r"^\s*--> (.+?):(\d+):(\d+)\s*$")
# A label sits under the code, on a line with no line number: `  |   ---   ^^^ expected i32`.
_LABEL = re.compile(r"^\s*\|[\s|^\-~]*[\^\-~]\s+(\S.*)$")
_NOTE = re.compile(r"^\s*(?:= )?((?:help|note): .*)$")
_STDOUT = re.compile(r"^---- (\S+) stdout ----$")
_PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at (?P<rest>.*)$")
_PANIC_AT = re.compile(r"^([^\s:'][^:\n]*):(\d+):(\d+):$")
_PANIC_OLD = re.compile(r"^'(.*)', ([^\s:]+):(\d+):(\d+)$")
_RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")
_PANIC_END = ("note: run with `RUST_BACKTRACE", "stack backtrace:", "note: Some details")


def parse_cargo(output: str) -> Parsed:
    """Compiler errors (JSON or human) and failing tests from `cargo check`/`build`/`test`."""
    text = strip_ansi(output)
    failures = [f for event in json_lines(text) if (f := _json_failure(event)) is not None]
    human = [line for line in text.splitlines() if not line.lstrip().startswith("{")]
    failures += _human_failures(human)
    failures += _test_failures(human)
    return Parsed(
        tuple(failures), _totals(human) or (f"{len(failures)} errors" if failures else "")
    )


def _json_failure(event: dict[str, object]) -> Failure | None:
    message = event.get("message")
    if event.get("reason") != "compiler-message" or not isinstance(message, dict):
        return None
    if message.get("level") not in ("error", "error: internal compiler error"):
        return None
    text = to_str(message.get("message")) or "(no message)"
    spans = message.get("spans")
    spans = spans if isinstance(spans, list) else []
    primary = next((s for s in spans if isinstance(s, dict) and s.get("is_primary")), None)
    if primary is None and text.startswith(("aborting due to", "could not compile")):
        return None
    lines = [text]
    if primary is not None and (label := to_str(primary.get("label"))):
        lines.append(label)
    children = message.get("children")
    for child in children if isinstance(children, list) else []:
        if isinstance(child, dict) and (note := to_str(child.get("message"))):
            lines.append(f"{child.get('level')}: {note}")
    code = message.get("code")
    return Failure(
        file=to_str(primary.get("file_name")) if primary else None,
        line=to_int(primary.get("line_start")) if primary else None,
        column=to_int(primary.get("column_start")) if primary else None,
        message="\n".join(lines),
        kind="build",
        tool="cargo",
        code=to_str(code.get("code")) if isinstance(code, dict) else None,
    )


def _human_failures(lines: Sequence[str]) -> list[Failure]:
    """`error[E0308]: …` headlines with their `-->` location, labels and help notes."""
    failures: list[Failure] = []
    index = 0
    while index < len(lines):
        headline = _HEADLINE.match(lines[index])
        arrow = _ARROW.match(lines[index + 1]) if index + 1 < len(lines) else None
        if headline is None or arrow is None or headline.group(1) != "error":
            index += 1
            continue
        body: list[str] = [headline.group(3)]
        index += 2
        while index < len(lines) and lines[index].strip():
            line = lines[index]
            if match := _LABEL.match(line) or _NOTE.match(line):
                body.append(match.group(1))
            index += 1
        failures.append(
            Failure(
                file=arrow.group(1),
                line=to_int(arrow.group(2)),
                column=to_int(arrow.group(3)),
                message="\n".join(body),
                kind="build",
                tool="cargo",
                code=headline.group(2),
            )
        )
    return failures


def _test_failures(lines: Sequence[str]) -> list[Failure]:
    """One failure per `---- name stdout ----` block, located at its panic."""
    failures: list[Failure] = []
    reported: set[str] = set()
    for index, line in enumerate(lines):
        if match := _STDOUT.match(line):
            name = match.group(1)
            reported.add(name)
            failures.append(_panic_failure(name, _block(lines, index + 1)))
    listed = _listed_failures(lines)
    failures.extend(
        Failure(test=name, message="failed", kind="test", tool="cargo")
        for name in listed
        if name not in reported
    )
    return failures


def _block(lines: Sequence[str], start: int) -> list[str]:
    end = start
    while end < len(lines) and not _STDOUT.match(lines[end]) and lines[end] != "failures:":
        end += 1
    return list(lines[start:end])


def _panic_failure(name: str, block: list[str]) -> Failure:
    file: str | None = None
    number = column = None
    message: list[str] = []
    for index, line in enumerate(block):
        panic = _PANIC.match(line)
        if panic is None:
            continue
        rest = panic.group("rest")
        if (old := _PANIC_OLD.match(rest)) is not None:
            message = [old.group(1)]
            file, number, column = old.group(2), to_int(old.group(3)), to_int(old.group(4))
        elif (new := _PANIC_AT.match(rest)) is not None:
            file, number, column = new.group(1), to_int(new.group(2)), to_int(new.group(3))
            message = _panic_message(block[index + 1 :])
        break
    if not message:
        message = [line for line in block if line.strip()] or ["failed"]
    return Failure(
        file=file,
        line=number,
        column=column,
        test=name,
        message="\n".join(message),
        kind="test",
        tool="cargo",
    )


def _panic_message(lines: Sequence[str]) -> list[str]:
    message: list[str] = []
    for line in lines:
        if line.startswith(_PANIC_END) or (not line.strip() and message):
            break
        if line.strip():
            message.append(line)
    return message


def _listed_failures(lines: Sequence[str]) -> list[str]:
    # The closing `failures:` list names every failed test, even ones that printed nothing.
    names: list[str] = []
    for index, line in enumerate(lines):
        if line == "failures:" and index + 1 < len(lines) and lines[index + 1].startswith("    "):
            for item in lines[index + 1 :]:
                if not item.startswith("    "):
                    break
                names.append(item.strip())
    return names


def _totals(lines: Sequence[str]) -> str:
    passed = failed = 0
    seen = False
    for line in lines:
        if match := _RESULT.match(line):
            seen = True
            passed += to_int(match.group(1)) or 0
            failed += to_int(match.group(2)) or 0
    return f"{passed} passed, {failed} failed" if seen else ""
