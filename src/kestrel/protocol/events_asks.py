"""Events of what waits on a person: a permission question, its answer, and a stop asked for.

Each is written by whoever takes part: the running session asks (`approval_requested`), and the
answer (`approval_decided`) or a stop (`cancel_requested`) may come from any process that can
write the log: the terminal that runs the session, a second terminal, a server, an IDE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.protocol.events_base import ToolKind

ApprovalScope = Literal["once", "session"]
"""What an allowing answer covers: this call, or every later call of the tool in the session."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """The session waits for a person to allow or deny a tool call."""

    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    name: str
    arguments: str
    """The call's arguments as JSON text, exactly as it would run (after any hook's rewrite)."""
    kind: ToolKind
    reason: str
    """Why Kestrel asks: the rule, the classifier's finding, or the permission mode."""
    repeatable: bool = True
    """False when the question is asked every time (a dangerous action): no `session` scope."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A person answered a permission question."""

    type: Literal["approval_decided"] = "approval_decided"
    call_id: str
    allow: bool
    scope: ApprovalScope = "once"
    message: str = ""
    """The person's words; for a denial, what the model is told."""
    by: str = ""
    """Who answered: `terminal`, `kestrel approve`, or a client of the service."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequested:
    """A person asked the running session to stop; the process running it stops it."""

    type: Literal["cancel_requested"] = "cancel_requested"
    by: str = ""
    reason: str = ""
