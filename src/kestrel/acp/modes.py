"""What Kestrel's words are in the Agent Client Protocol: permission modes as session modes,
how a run stopped as a stop reason, the answers to a permission question, and how to sign in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import get_args

from acp.schema import (
    AuthMethodAgent,
    PermissionOption,
    SessionMode,
    SessionModeState,
    StopReason,
)

from kestrel.protocol.events import (
    ApprovalRequested,
    ApprovalScope,
    BudgetWarning,
    Event,
    ModelCompleted,
    PermissionMode,
    SessionFinished,
)

MODES: dict[PermissionMode, tuple[str, str]] = {
    "default": ("Ask", "Reads run; edits and commands are asked about unless a rule allows them."),
    "accept-edits": (
        "Accept edits",
        "Edits run unasked and land in the checkout once verified; commands are asked about.",
    ),
    "plan": ("Plan", "Read only: explore and propose a plan; nothing is changed."),
    "bypass": (
        "Bypass",
        "Everything runs inside the sandbox unasked; only dangerous actions are asked about.",
    ),
}
"""Each permission mode's name and description, as an editor's mode picker shows them."""

AUTH_METHOD_ID = "environment"
API_KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KESTREL_BASE_URL")
"""The environment variables Kestrel reads for a model's credentials or a local server."""


def is_mode(value: str) -> bool:
    """Whether `value` names a permission mode."""
    return value in get_args(PermissionMode)


def mode_state(current: PermissionMode) -> SessionModeState:
    """The session modes an editor may offer, with `current` chosen."""
    modes = [
        SessionMode(id=mode, name=name, description=text) for mode, (name, text) in MODES.items()
    ]
    return SessionModeState(current_mode_id=current, available_modes=modes)


def auth_method() -> AuthMethodAgent:
    """The one way to sign in: an API key in the environment Kestrel starts with."""
    return AuthMethodAgent(
        id=AUTH_METHOD_ID,
        name="API key in the environment",
        description=(
            "Kestrel reads its model's key from the environment it is started with: "
            "ANTHROPIC_API_KEY for anthropic:MODEL, OPENAI_API_KEY for openai:MODEL "
            "(OPENAI_BASE_URL or KESTREL_BASE_URL for a local OpenAI-compatible server, which "
            "needs no key). Set it in the editor's agent settings (`env`) or the shell that "
            "starts the editor; scripted:FILE models need none."
        ),
    )


def stop_reason(finished: SessionFinished, events: Sequence[Event]) -> StopReason:
    """The stop reason of a prompt whose run ended with `finished`; `events`: the run's."""
    match finished.reason:
        case "cancelled":
            return "cancelled"
        case "budget":
            warned = [e.budget for e in events if isinstance(e, BudgetWarning)]
            tokens = bool(warned) and warned[-1] in ("tokens", "tokens_per_day")
            return "max_tokens" if tokens else "max_turn_requests"
        case "loop":
            return "max_turn_requests"
        case "hook":
            return "refusal"
        case "error":
            replies = [e for e in events if isinstance(e, ModelCompleted)]
            if replies and replies[-1].stop_reason == "max_tokens":
                return "max_tokens"
            return "end_turn"
        case _:
            return "end_turn"


ALLOW_ONCE = "allow-once"
ALLOW_ALWAYS = "allow-always"
REJECT = "reject"


def permission_options(question: ApprovalRequested) -> list[PermissionOption]:
    """Allow once, allow for the rest of the session (when the question may be answered so),
    or reject."""
    options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")]
    if question.repeatable:
        name = f"Always allow {question.name} in this session"
        options.append(PermissionOption(option_id=ALLOW_ALWAYS, name=name, kind="allow_always"))
    options.append(PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"))
    return options


ANSWERS: Mapping[str, tuple[bool, ApprovalScope]] = {
    ALLOW_ONCE: (True, "once"),
    ALLOW_ALWAYS: (True, "session"),
    REJECT: (False, "once"),
}
"""What each option answers: allow or not, and for how long."""
