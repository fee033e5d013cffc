"""Loop detection: the same call with the same result repeated, two calls alternating, or
failing results oscillating between two states.

A state is a call, what it returned and the files it ran on. The same error coming back after the
files changed is progress, not a loop: a model that changes its approach while a missing module
keeps failing every run must not be stopped (callers fold the files into the fingerprints)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Literal

from kestrel.protocol.messages import ToolCall


def signature(call: ToolCall, result: str) -> str:
    """A short fingerprint of a call and what it returned."""
    try:
        arguments = json.dumps(call.parsed_arguments(), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    blob = f"{call.name}\0{arguments}\0{result}".encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopVerdict:
    """What the detector saw and what to do about it."""

    pattern: Literal["repeat", "alternate"]
    action: Literal["warn", "stop"]
    detail: str


@dataclass(slots=True)
class LoopDetector:
    """Watches call fingerprints; warns once per streak at `warn_after`, stops at `stop_after`."""

    warn_after: int = 3
    stop_after: int = 5
    history: list[str] = field(default_factory=list)
    warned: bool = False

    def observe(self, fingerprint: str) -> LoopVerdict | None:
        """Record one call; return a verdict when a loop warrants one."""
        self.history.append(fingerprint)
        repeats = self._streak(1)
        cycles = self._streak(2) // 2 if self._alternates() else 0
        pattern: Literal["repeat", "alternate"] = "repeat" if repeats >= cycles else "alternate"
        count = max(repeats, cycles)
        if count < self.warn_after:
            self.warned = False
            return None
        what = (
            f"the same call returned the same result {count} times in a row"
            if pattern == "repeat"
            else f"two calls have alternated with the same results {count} times"
        )
        if count >= self.stop_after:
            return LoopVerdict(pattern=pattern, action="stop", detail=what)
        if self.warned:
            return None
        self.warned = True
        return LoopVerdict(
            pattern=pattern,
            action="warn",
            detail=f"{what}. This is not making progress: change approach.",
        )

    def _streak(self, period: int) -> int:
        """How many trailing entries repeat with the given period (counting the first one)."""
        h = self.history
        n = len(h)
        count = min(n, period)
        while count < n and h[n - 1 - count] == h[n - 1 - count + period]:
            count += 1
        return count if n >= period else 0

    def _alternates(self) -> bool:
        return len(self.history) >= 2 and self.history[-1] != self.history[-2]


_NOISE = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b|0x[0-9a-fA-F]+")
"""Durations and addresses, which differ between two runs of the same failure."""


def failure_signature(call: ToolCall, result: str, files: str = "") -> str:
    """A fingerprint of a failing result that two runs of the same failure on the same files
    share (`files` names the files the call ran on: the same error on changed files is not the
    same state)."""
    return signature(call, f"{files}\0{_NOISE.sub('#', result)}")


def gist(result: str, limit: int = 100) -> str:
    """The line of a failing result that says most about it: its last line of output."""
    lines = [
        line.strip()
        for line in result.splitlines()
        if line.strip() and not line.startswith(("[exit code", "[kestrel]", "[timed out"))
    ]
    last = lines[-1] if lines else result.strip()
    return last if len(last) <= limit else last[: limit - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Oscillation:
    """Failing results went back and forth between two states."""

    detail: str
    first_call: str
    """The call the loop is taken to begin with: going back to before it undoes the loop."""


@dataclass(slots=True)
class OscillationDetector:
    """Watches failing results for two states that keep coming back in turn (X, Y, X, Y...),
    whatever calls lie between them, until a call that failed before succeeds."""

    after: int = 4
    """Failing results alternating between two states before it counts as a loop."""
    calls: list[str] = field(default_factory=list)
    failures: list[tuple[int, str, str]] = field(default_factory=list)
    """(index in `calls`, fingerprint, gist) of each failing result since the last progress."""
    failed_keys: set[str] = field(default_factory=set)
    floor: int = 0
    """The first call index a loop may be taken to begin at."""

    def observe(
        self, call_id: str, key: str, fingerprint: str, text: str, *, failed: bool
    ) -> Oscillation | None:
        """Record one finished call (`key` names the call, `fingerprint` its result)."""
        index = len(self.calls)
        self.calls.append(call_id)
        if not failed:
            if key in self.failed_keys:  # A check that failed now passes: that is progress.
                self.failures.clear()
                self.floor = index + 1
            return None
        self.failed_keys.add(key)
        self.failures.append((index, fingerprint, text))
        count = _alternating([f for _, f, _ in self.failures])
        if count < self.after:
            return None
        tail = self.failures[-count:]
        before = self.failures[-count - 1][0] + 1 if len(self.failures) > count else self.floor
        # The calls between the second and third failure redo what led to the first one.
        redo = tail[2][0] - tail[1][0] - 1
        start = max(tail[0][0] - redo, before, self.floor)
        detail = (
            f"failing results went back and forth between two states {count} times "
            f"({tail[0][2]!r} and {tail[1][2]!r})"
        )
        self.failures.clear()
        self.floor = index + 1
        return Oscillation(detail=detail, first_call=self.calls[start])


def _alternating(fingerprints: list[str]) -> int:
    """How many trailing entries alternate between two different values."""
    n = len(fingerprints)
    if n < 2 or fingerprints[-1] == fingerprints[-2]:
        return 0
    count = 2
    while count < n and fingerprints[n - 1 - count] == fingerprints[n - 1 - count + 2]:
        count += 1
    return count
