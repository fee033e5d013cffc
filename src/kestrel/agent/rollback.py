"""What a resume does with a command a crash cut short: undo it whole, or say why it cannot.

A tool call that may change files is a step that lands whole or not at all. The checkpoint that
holds the files as they were when the call started is its rollback point: every call that may
change files runs alone, right after a checkpoint (one that finds nothing changed records
nothing, and the previous one holds the files). On resume, a command that started and has no
result is undone by restoring that checkpoint, before the session does anything else.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kestrel.agent.state import SessionState
from kestrel.protocol.events import ModelCompleted, ToolFinished, ToolKind
from kestrel.protocol.messages import AssistantTurn, ToolCall
from kestrel.store.base import EventStore

TEST_RUNNERS = (
    ("pytest",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
    ("python", "-m", "unittest"),
    ("python3", "-m", "unittest"),
    ("tox",),
    ("nox",),
    ("npm", "test"),
    ("yarn", "test"),
    ("pnpm", "test"),
    ("cargo", "test"),
    ("go", "test"),
    ("make", "test"),
    ("mvn", "test"),
    ("gradle", "test"),
)
"""Commands that only run tests: running one again after a rollback changes nothing."""

_SHELL_SYNTAX = re.compile(r"[;&|<>`$()\n]")
IDEMPOTENT_TOOLS = frozenset({"verify"})
"""Tools other than reads whose call may be run again after a rollback: they only check."""


@runtime_checkable
class KnowsHead(Protocol):
    """A checkpointer that can say which checkpoint it recorded last, logged or not."""

    async def head_id(self) -> str | None:
        """The newest checkpoint's id; None before the first."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePolicy:
    """How a resume treats calls a crash cut short (from the settings)."""

    rerun_idempotent: bool = False
    """Run a rolled-back call again on its own when its kind only checks (tests, `verify`)."""
    outside: str = ""
    """What a command could reach outside the workspace, which no rollback undoes; empty when
    the sandbox kept it to the workspace."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What a resume does with one call left without a result."""

    result: ToolFinished | None
    """The result to log; None to run the call again."""
    restore: str | None = None
    """The checkpoint to restore first (the call's rollback point), when it is rolled back."""


def rollback_point(state: SessionState) -> str | None:
    """The checkpoint holding the files as the session's unfinished call found them.

    Calls that may change files run alone, each after a checkpoint, and the next checkpoint is
    taken only after the call's result: so for a call without a result, the newest checkpoint
    the log knows (recorded, rewound or recovered to) is the one from just before it.
    """
    return state.marks.files


def roll_back_command(
    call: ToolCall, point: str | None, policy: ResumePolicy, *, idempotent: bool
) -> Settled:
    """A command cut short: undone from its rollback point, or reported when there is none."""
    if point is None:
        return Settled(
            interrupted(
                call,
                "[kestrel] Interrupted: the session stopped while this command was running, "
                "and no checkpoint holds the files from before it, so its effects are unknown. "
                "Check the state, and run it again if it is still needed.",
            )
        )
    if policy.rerun_idempotent and idempotent:
        return Settled(None, restore=point)
    text = (
        "[kestrel] Interrupted and rolled back: the session stopped while this call was "
        f"running, and the files were restored to checkpoint {point[:12]}, taken just before "
        "it, so nothing of it remains in the workspace. Run it again if it is still needed."
    )
    if policy.outside:
        text += f" It could reach {policy.outside}: whatever it did there was not undone."
    return Settled(interrupted(call, text), restore=point)


def roll_back_edit(call: ToolCall, point: str, paths: str) -> Settled:
    """An edit caught between its writes whose rest cannot be finished: undone from its point."""
    return Settled(
        interrupted(
            call,
            f"[kestrel] Interrupted and rolled back: the session stopped while writing {paths}, "
            f"and the files were restored to checkpoint {point[:12]}, taken just before this "
            "call, so nothing of it remains. Read the files, then make the change again.",
        ),
        restore=point,
    )


def interrupted(call: ToolCall, content: str, *, error: bool = True) -> ToolFinished:
    """The result a resume logs for a call cut short."""
    return ToolFinished(
        call_id=call.id, name=call.name, content=content, is_error=error, interrupted=error
    )


def is_idempotent(call: ToolCall, kind: ToolKind | None) -> bool:
    """Whether running the call again after a rollback is the same as running it once:
    reads, searches and checks (`verify`, a command that only runs a test runner)."""
    if kind == "read" or call.name in IDEMPOTENT_TOOLS:
        return True
    if kind != "execute":
        return False
    try:
        command = json.loads(call.arguments).get("command", "")
    except (ValueError, AttributeError):
        return False
    if not isinstance(command, str) or _SHELL_SYNTAX.search(command):
        return False
    try:
        words = tuple(shlex.split(command))
    except ValueError:
        return False
    return any(words[: len(runner)] == runner for runner in TEST_RUNNERS)


def cut_short(state: SessionState, kind_of: Callable[[str], ToolKind | None]) -> ToolCall | None:
    """The call that may change files which started and has no result, if there is one: its
    files may hold part of it until a resume rolls it back. Unknown tools count as changing."""
    for call in state.unfinished:
        if call.id in state.started and logged_kind(state, call, kind_of) != "read":
            return call
    return None


def logged_kind(
    state: SessionState, call: ToolCall, kind_of: Callable[[str], ToolKind | None]
) -> ToolKind | None:
    """The kind of a logged call: its tool's, except that a call of a reading tool that was
    logged as able to change files (a `task` call whose subagent can write) is a command."""
    kind = kind_of(call.name)
    if kind == "read" and call.id in state.changing:
        return "execute"
    return kind


def logged_final_answer(store: EventStore, state: SessionState) -> ModelCompleted | None:
    """The model's final answer when the conversation ends with it but the session did not
    finish (killed during the final verification, say): a resume finishes from that answer
    instead of asking the model again. None otherwise."""
    last = state.messages[-1] if state.messages else None
    if state.finished is not None or state.pending or not isinstance(last, AssistantTurn):
        return None
    if last.tool_calls:
        return None
    for record in reversed(store.read(state.session_id)):
        if isinstance(record.event, ModelCompleted):
            return record.event if record.event.message == last else None
    return None
