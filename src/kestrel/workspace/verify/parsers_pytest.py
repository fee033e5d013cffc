"""pytest's terminal output, read as the outer run reports it.

A project's test may itself run pytest (on a fixture project, say) and print what it printed.
That nested output appears inside a test's captured output, or, with `-s`, before the outer
run's report; it has its own failure blocks, summary and totals line. Only the outer run's own
result lines count: its totals are the last totals line, its short summary the one right before
it, and its failure blocks the ones that summary names.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from kestrel.workspace.verify._text import is_library_path, strip_ansi, to_int
from kestrel.workspace.verify.failures import Failure, FailureKind, Parsed

_SECTION = re.compile(r"^={3,} (.+?) ={3,}$")
_BLOCK = re.compile(r"^_+ (.+?) _+$")
"""A failure or error block's title line: pytest pads it with at least one `_` each side (titles
longer than the terminal get just one or two)."""
_CAPTURED = re.compile(r"^-{3,} (Captured|Stored) .* -{3,}$")
_FRAME = re.compile(r"^([^\s<>][^:\n]*?):(\d+): (.*)$")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_SHORT = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - (.*))?$")
_PYTEST_TOTALS = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|skipped|errors?|deselected|xfailed|xpassed|warnings?|"
    r"rerun)(?:, )?)+ in [\d.]+s.*?|no tests ran in [\d.]+s.*?)\s*=*$"
)
MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
"""The message of a module that could not be found at all; its group is the dotted name."""
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
_REPORT_SECTIONS = frozenset({"errors", "failures", "passes", "warnings summary"})


@dataclass(slots=True)
class _Block:
    title: str
    index: int
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Scan:
    blocks: list[_Block] = field(default_factory=list)
    problems: list[Failure] = field(default_factory=list)
    summary_at: int = -1
    """Where the last `short test summary info` header is; -1 when there is none."""


def parse_pytest(output: str) -> Parsed:
    """Failures and errors from pytest's terminal output (any `--tb` style, `-q`, `-rA`)."""
    lines = strip_ansi(output).splitlines()
    ends = [index for index, line in enumerate(lines) if _PYTEST_TOTALS.match(line)]
    final = ends[-1] if ends else len(lines)
    # Everything up to the last totals line but the outer one is, or may hold, nested runs.
    nested_end = ends[-2] if len(ends) > 1 else -1
    scan = _scan(lines, nested_end)
    summary: list[tuple[str, str, str]] | None = None
    if scan.summary_at > nested_end:
        summary = [
            (match.group(1), match.group(2), match.group(3) or "")
            for line in lines[scan.summary_at + 1 : final]
            if (match := _SHORT.match(line))
        ]
    totals_match = _PYTEST_TOTALS.match(lines[final]) if ends else None
    totals = totals_match.group(1) if totals_match else ""
    failures = _match_blocks(scan.blocks, summary or [], nested_end)
    return Parsed(tuple(failures + _internal_errors(scan.problems)), totals)


def _scan(lines: Sequence[str], nested_end: int) -> _Scan:
    scan = _Scan()
    section = ""
    for index, line in enumerate(lines):
        if match := _SECTION.match(line):
            section = match.group(1).strip().lower()
            if section == "short test summary info":
                scan.summary_at = index
        elif section in ("errors", "failures") and (match := _BLOCK.match(line)):
            scan.blocks.append(_Block(match.group(1).strip(), index))
        elif index > nested_end and (
            line.startswith("INTERNALERROR>")
            # Inside a report section the same words may be a test's own captured output.
            or (line.startswith("ERROR: ") and section not in _REPORT_SECTIONS)
        ):
            scan.problems.append(Failure(message=line, kind="error", tool="pytest"))
        elif section in ("errors", "failures") and scan.blocks:
            scan.blocks[-1].lines.append(line)
    return scan


def _match_blocks(
    blocks: list[_Block], summary: list[tuple[str, str, str]], nested_end: int
) -> list[Failure]:
    # Blocks are titled by test name only; the short summary names the node id. Pair them in
    # order, by key, so two files' `test_x` each get their own node id. A nested run may hold a
    # block of the same name: the outer one is the block after the nested runs' output, else
    # the first (an outer block comes before the nested output captured in it).
    pending: dict[str, list[_Block]] = {}
    for block in blocks:
        pending.setdefault(_block_key(block.title), []).append(block)
    failures: list[Failure] = []
    for _outcome, node, short in summary:
        queue = pending.get(_node_key(node), [])
        chosen = next((b for b in queue if b.index > nested_end), queue[0] if queue else None)
        if chosen is not None:
            queue.remove(chosen)
        failures.append(_block_failure(chosen, node, short))
    # Blocks the summary does not name count only outside any nested run's output.
    left = sorted((b for q in pending.values() for b in q), key=lambda block: block.index)
    failures.extend(_block_failure(b, _block_key(b.title)) for b in left if b.index > nested_end)
    return failures


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


def _block_failure(block: _Block | None, node: str, short: str = "") -> Failure:
    collecting = "::" not in node and node.endswith(".py")
    lines = block.lines if block is not None else []
    message, file, line = read_traceback(lines)
    message = message or short or ("collection failed" if collecting else "failed")
    kind: FailureKind = "test"
    if collecting:
        # A test module that fails to import the code is the code's failure (a name removed, a
        # module-level error); a module missing outright may be the environment's (see
        # `imports.own_missing_modules`, which knows the project).
        syntax = any(name in message for name in _SYNTAX_ERRORS)
        kind = "syntax" if syntax else "error" if MISSING_MODULE.search(message) else "test"
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
