"""What verification found, as values: failures, the result of each check, and the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

FailureKind = Literal["test", "lint", "type", "syntax", "build", "security", "error"]
CheckStatus = Literal["passed", "failed", "error", "skipped", "timed_out"]

MAX_MESSAGE_LINES = 12
MAX_MESSAGE_CHARS = 1500
RENDER_MAX_FAILURES = 40
RENDER_LINE_CHARS = 320
_LINE_JOIN = " ⏎ "


def cap_message(text: str) -> str:
    """`text` cut to a few lines and characters, with an explicit note of what was cut."""
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    kept = lines[:MAX_MESSAGE_LINES]
    dropped = len(lines) - len(kept)
    body = "\n".join(kept)
    if len(body) > MAX_MESSAGE_CHARS:
        cut = body[:MAX_MESSAGE_CHARS]
        # Count the lines lost to the character cap too, so the note stays honest.
        dropped += body.count("\n") - cut.count("\n")
        if dropped == 0:
            return f"{cut}… ({len(body) - len(cut)} more characters)"
        body = cut.rstrip()
    if dropped:
        return f"{body}\n… ({dropped} more lines)"
    return body


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """One problem a check found: where, in which test, what, and which tool and rule said so.

    `message` is capped on creation (see `cap_message`), so no failure can flood the model.
    """

    file: str | None = None
    line: int | None = None
    column: int | None = None
    test: str | None = None
    message: str
    kind: FailureKind
    tool: str
    code: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", cap_message(self.message))

    def location(self) -> str:
        """`file:line` (or just `file`), empty when the failure has no file."""
        if self.file is None:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def render(self) -> str:
        """One line: `file:line: [kind/tool code] message (test)`."""
        label = f"{self.kind}/{self.tool}" + (f" {self.code}" if self.code else "")
        where = self.location()
        head = f"{where + ': ' if where else ''}[{label}] "
        test = f" ({self.test})" if self.test else ""
        message = _LINE_JOIN.join(line.strip() for line in self.message.splitlines() if line)
        message = message or "(no message)"
        # Shorten the message, never the location or the test id: those say where to look.
        room = max(RENDER_LINE_CHARS - len(head) - len(test), 40)
        if len(message) > room:
            message = message[: room - 1] + "…"
        return f"{head}{message}{test}"


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem the security gate found on a line the change added: the failure the model
    sees, and whether it stops the change from being applied without a person's decision."""

    failure: Failure
    blocking: bool


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a parser read from one tool's output: the failures and the tool's own summary."""

    failures: tuple[Failure, ...] = ()
    summary: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """How one check ended and the failures it reported."""

    name: str
    command: tuple[str, ...]
    status: CheckStatus
    failures: tuple[Failure, ...] = ()
    summary: str = ""
    exit_code: int | None = None

    def headline(self) -> str:
        """`name: status (summary)`."""
        status = self.status.replace("_", " ")
        return f"{self.name}: {status}" + (f" ({self.summary})" if self.summary else "")


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """The results of every check run for one verification."""

    checks: tuple[CheckResult, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no check failed, errored or timed out."""
        return all(check.status in ("passed", "skipped") for check in self.checks)

    @property
    def failures(self) -> tuple[Failure, ...]:
        """Every failure of every check, in check order."""
        return tuple(failure for check in self.checks for failure in check.failures)

    def render(self, headline: str | None = None, max_failures: int = RENDER_MAX_FAILURES) -> str:
        """Compact text for the model: a line per check, then a line per failure, capped.

        `headline` replaces the first line's verdict (e.g. why the change was not verified).
        """
        if not self.checks:
            return "verification: no checks apply to these changes"
        bad = sum(check.status not in ("passed", "skipped") for check in self.checks)
        verdict = "passed" if self.ok else f"failed ({bad} of {len(self.checks)} checks)"
        lines = [headline or f"verification {verdict}"]
        lines.extend(f"  {check.headline()}" for check in self.checks)
        lines.extend(_failure_lines(self.failures, max_failures))
        return "\n".join(lines)


def _failure_lines(failures: Sequence[Failure], limit: int) -> list[str]:
    shown = [failure.render() for failure in failures[: max(limit, 0)]]
    left = len(failures) - len(shown)
    if left:
        shown.append(f"… {left} more failures not shown (showing the first {len(shown)})")
    return shown
