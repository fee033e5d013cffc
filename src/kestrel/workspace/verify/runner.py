"""Running checks through the session's executor and judging each one from its parsed output."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal, Protocol

from kestrel.protocol.oserrors import os_error_text
from kestrel.workspace.verify._text import tail
from kestrel.workspace.verify.detect import Check
from kestrel.workspace.verify.failures import (
    CheckResult,
    CheckStatus,
    Failure,
    Parsed,
    VerificationReport,
)
from kestrel.workspace.verify.parsers import parse_output
from kestrel.workspace.verify.syntax import syntax_failures

DEFAULT_TIMEOUT_S = 300.0
MAX_PARSED_BYTES = 2_000_000
MAX_SYNTAX_BYTES = 2_000_000
CHECK_ENV: Mapping[str, str] = {
    "NO_COLOR": "1",
    "FORCE_COLOR": "0",
    "PY_COLORS": "0",
    "CARGO_TERM_COLOR": "never",
    "RUST_BACKTRACE": "0",
    "TERM": "dumb",
}
"""Set for every check: colour codes and backtraces only get in the parsers' way."""

OutputSink = Callable[[Literal["stdout", "stderr"], str], None]
"""Called with each piece of a check's output as it arrives."""


class CommandOutcome(Protocol):
    """How a command ended; `kestrel.sandbox.base.ExecResult` is one."""

    @property
    def exit_code(self) -> int:
        """The command's exit status."""
        ...

    @property
    def output(self) -> str:
        """Everything it printed, stdout and stderr interleaved."""
        ...

    @property
    def timed_out(self) -> bool:
        """Whether it was killed for running past its timeout."""
        ...


class CommandExecutor(Protocol):
    """What verification needs of an executor; every `kestrel.sandbox.base.Executor` fits.

    Declared here because the layer contract keeps `workspace` and `sandbox` independent.
    """

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        on_output: OutputSink | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandOutcome:
        """Run `command` with `bash -c` in `cwd`, killing it after `timeout_s`."""
        ...


class Verifier:
    """Runs checks one after another and turns their output into a `VerificationReport`.

    A check is never passed on silence: a crash, an unreadable output with a failing exit code,
    or a timeout each becomes a failure the model sees.
    """

    def __init__(
        self,
        executor: CommandExecutor,
        root: Path,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        on_output: OutputSink | None = None,
    ) -> None:
        self._executor = executor
        self._root = root
        self._timeout_s = timeout_s
        self._env = {**CHECK_ENV, **(env or {})}
        self._on_output = on_output

    async def run(self, checks: Sequence[Check]) -> VerificationReport:
        """Run every check, in order, and report them all."""
        return VerificationReport(tuple([await self.run_check(check) for check in checks]))

    async def run_check(self, check: Check) -> CheckResult:
        """Run one check and judge it."""
        if check.parser == "syntax":
            return self._syntax(check)
        if not check.command:
            return _broken(check, "the check has no command to run", None)
        timeout_s = self.timeout_for(check)
        try:
            result = await self._executor.run(
                shlex.join(check.command),
                cwd=check.cwd,
                timeout_s=timeout_s,
                on_output=self._on_output,
                env=self._env,
            )
        except OSError as exc:
            return _broken(check, f"could not start: {os_error_text(exc)}", None)
        # Parsing a runaway log whole would cost more than it tells; its end has the summary.
        output = result.output[-MAX_PARSED_BYTES:]
        parsed = parse_output(check.parser, output, tool=tool_name(check))
        judged = judge(check, result, parsed, root=self._root, timeout_s=timeout_s)
        if not check.note:
            return judged
        summary = f"{judged.summary}; {check.note}" if judged.summary else check.note
        return replace(judged, summary=summary)

    def timeout_for(self, check: Check) -> float:
        """The check's own timeout where it sets one, never longer than the verifier's."""
        if check.timeout_s is None:
            return self._timeout_s
        return min(check.timeout_s, self._timeout_s)

    def _syntax(self, check: Check) -> CheckResult:
        failures: list[Failure] = []
        parsed = 0
        for path in check.paths:
            target = self._root / path
            try:
                if target.stat().st_size > MAX_SYNTAX_BYTES:
                    continue  # generated or vendored; parsing it would only cost time
                source = target.read_bytes()
            except OSError:
                continue  # deleted since detection: nothing left to parse
            found = syntax_failures(path, source)
            if found is not None:
                parsed += 1
                failures.extend(found)
        summary = f"{parsed} files parsed" + (f", {len(failures)} errors" if failures else "")
        return CheckResult(
            name=check.name,
            command=check.command,
            status="failed" if failures else "passed",
            failures=tuple(failures),
            summary=summary,
        )


def tool_name(check: Check) -> str:
    """The tool a check's own failures are attributed to: the first word of its name."""
    return check.name.split(" ", 1)[0] or check.parser


def judge(
    check: Check, result: CommandOutcome, parsed: Parsed, *, root: Path, timeout_s: float
) -> CheckResult:
    """The check's status from its exit code and parsed failures; never a pass on a bad exit."""
    failures = tuple(relocate(failure, root, check.cwd) for failure in parsed.failures)
    if result.timed_out:
        note = Failure(
            message=f"stopped after {timeout_s:g} s; the output ended with:\n{tail(result.output)}",
            kind="error",
            tool=tool_name(check),
        )
        return CheckResult(
            name=check.name,
            command=check.command,
            status="timed_out",
            failures=(*failures, note),
            summary=f"timed out after {timeout_s:g} s",
            exit_code=None,
        )
    status: CheckStatus
    if failures:
        status = "failed"
    elif result.exit_code in check.ok_exit_codes:
        status = "passed"
    else:
        message = (
            f"exited with code {result.exit_code} and reported nothing that could be read as "
            f"failures; the output ended with:\n{tail(result.output) or '(no output)'}"
        )
        return _broken(check, message, result.exit_code)
    return CheckResult(
        name=check.name,
        command=check.command,
        status=status,
        failures=failures,
        summary=parsed.summary,
        exit_code=result.exit_code,
    )


def _broken(check: Check, message: str, exit_code: int | None) -> CheckResult:
    failure = Failure(message=message, kind="error", tool=tool_name(check))
    summary = (
        "could not run" if exit_code is None else f"exit code {exit_code}, output not understood"
    )
    return CheckResult(
        name=check.name,
        command=check.command,
        status="error",
        failures=(failure,),
        summary=summary,
        exit_code=exit_code,
    )


def relocate(failure: Failure, root: Path, cwd: Path) -> Failure:
    """`failure` with its file made relative to `root` where it lies inside it."""
    if failure.file is None:
        return failure
    file = failure.file
    if os.path.isabs(file):
        relative = _inside(file, root)
    else:
        base = os.path.relpath(cwd, root) if cwd != root else "."
        joined = os.path.normpath(os.path.join(base, file))
        relative = None if joined == ".." or joined.startswith("../") else joined
    if relative is None or relative == file:
        return failure
    return replace(failure, file=relative)


def _inside(file: str, root: Path) -> str | None:
    # Tools print resolved paths (/private/tmp on macOS) or the path as given: try both.
    for base in dict.fromkeys((str(root), os.path.realpath(root))):
        relative = os.path.relpath(file, base)
        if relative != ".." and not relative.startswith("../"):
            return relative
    return None
