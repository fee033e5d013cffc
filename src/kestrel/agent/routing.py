"""Which model role answers a step: the routing rule, a pure function over what the step is.

Today the loop makes one kind of model call, the turn: it sends the conversation and gets the
next reply. A turn goes to `plan` while the session is in plan mode (read-only exploration), to
`edit` while the model is fixing what a verification found, and to `main` otherwise. `title` and
`summary` steps go to `fast`: they are the hook for calls that condense text (a session title, a
summary of older turns), which the loop does not make yet; a caller that makes them asks
`role_for` with that kind and gets the cheap model without touching the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.protocol.events import ModelRole, PermissionMode

StepKind = Literal["turn", "title", "summary"]
"""A conversation turn, or a call that only condenses text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What the routing rule looks at: the kind of call and where the session stands."""

    kind: StepKind = "turn"
    permission_mode: PermissionMode = "default"
    fixing: bool = False
    """The last verification failed and the model was asked to fix it."""


def role_for(step: Step) -> ModelRole:
    """The role whose models answer `step`."""
    if step.kind != "turn":
        return "fast"
    if step.permission_mode == "plan":
        return "plan"
    if step.fixing:
        return "edit"
    return "main"
