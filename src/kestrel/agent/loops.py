"""Loop detection: the same call with the same result repeated, or two calls alternating."""

from __future__ import annotations

import hashlib
import json
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
