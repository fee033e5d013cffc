"""Events of the work's shape: the task list, plans, and subagents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kestrel.protocol.events_base import (
    FinishReason,
    ModelRole,
    PermissionMode,
    Totals,
)

TodoStatus = Literal["pending", "in_progress", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TodoItem:
    """One entry of the session's task list."""

    id: str
    text: str
    status: TodoStatus = "pending"


@dataclass(frozen=True, slots=True, kw_only=True)
class TodoUpdated:
    """The session's task list, whole, as the model or an approved plan last wrote it."""

    type: Literal["todo_updated"] = "todo_updated"
    items: tuple[TodoItem, ...] = ()
    source: Literal["model", "plan"] = "model"
    call_id: str | None = None
    """The `todo` call that wrote the list; None when an approved plan did."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    """One step of a proposed plan: what to do, where, how to check it, and what comes first."""

    id: str
    title: str
    files: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanProposed:
    """The model proposed a plan; nothing is written until the person approves it."""

    type: Literal["plan_proposed"] = "plan_proposed"
    plan_id: str
    summary: str = ""
    steps: tuple[PlanStep, ...] = ()
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanDecided:
    """The person approved (perhaps after editing) or rejected a proposed plan."""

    type: Literal["plan_decided"] = "plan_decided"
    plan_id: str
    decision: Literal["approved", "rejected"]
    steps: tuple[PlanStep, ...] = ()
    """The steps approved, as edited; empty for a rejection."""
    edited: bool = False
    reason: str = ""
    permission_mode: PermissionMode | None = None
    """The mode the session continues in after an approval."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted:
    """A `task` call started a subagent: a child session in the same store, with its own log."""

    type: Literal["subagent_started"] = "subagent_started"
    call_id: str
    child_session_id: str
    agent: str
    description: str = ""
    model: str = ""
    role: ModelRole | None = None
    """The role whose models answer the subagent; None when its definition names a model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFinished:
    """A subagent's session stopped; its spend counts toward the parent's totals and budgets."""

    type: Literal["subagent_finished"] = "subagent_finished"
    call_id: str
    child_session_id: str
    agent: str
    reason: FinishReason
    detail: str = ""
    totals: Totals = field(default_factory=Totals)
