"""Permission modes: what each lets through without asking the person."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.protocol.events import PermissionMode, ToolKind

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A verdict and the sentence that explains it."""

    verdict: Verdict
    reason: str


_TABLE: dict[PermissionMode, dict[ToolKind, Verdict]] = {
    "default": {"read": "allow", "edit": "ask", "execute": "ask"},
    "accept-edits": {"read": "allow", "edit": "allow", "execute": "ask"},
    "plan": {"read": "allow", "edit": "deny", "execute": "deny"},
    "bypass": {"read": "allow", "edit": "allow", "execute": "allow"},
}


def decide(mode: PermissionMode, kind: ToolKind | None) -> Decision:
    """The mode's verdict for a tool of `kind`; unknown tools are let through to fail cleanly."""
    if kind is None:
        return Decision(verdict="allow", reason="unknown tool: dispatch reports the error")
    verdict = _TABLE[mode][kind]
    if verdict == "deny":
        reason = f"{mode} mode is read-only: {kind} tools are not allowed"
    elif verdict == "ask":
        reason = f"{mode} mode asks before {kind} tools"
    else:
        reason = f"{mode} mode allows {kind} tools"
    return Decision(verdict=verdict, reason=reason)
