"""The events of one model call: its start, its streamed text and tool calls, its retries and
fail-overs, and its whole reply. Import them from `kestrel.protocol.events`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kestrel.protocol.events_base import ModelRole
from kestrel.protocol.messages import AssistantTurn, StopReason, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequestStarted:
    """A call to the model began."""

    type: Literal["model_request_started"] = "model_request_started"
    request_id: str
    model: str
    turn: int
    role: ModelRole = "main"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTextDelta:
    """A piece of the model's text."""

    type: Literal["model_text_delta"] = "model_text_delta"
    request_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelToolCallDelta:
    """A piece of a tool call the model is writing."""

    type: Literal["model_tool_call_delta"] = "model_tool_call_delta"
    request_id: str
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetrying:
    """A model call failed in a way worth retrying; the next attempt waits `delay_s`."""

    type: Literal["model_retrying"] = "model_retrying"
    request_id: str
    attempt: int
    delay_s: float
    error_kind: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSwitched:
    """A model call failed over: the same request goes to the next model of its role."""

    type: Literal["model_switched"] = "model_switched"
    request_id: str
    role: ModelRole
    from_model: str
    to_model: str
    error_kind: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCompleted:
    """A model call finished: the whole reply and what it cost."""

    type: Literal["model_completed"] = "model_completed"
    request_id: str
    message: AssistantTurn
    usage: Usage
    stop_reason: StopReason = "end_turn"
    cached: bool = False
    """True when the reply came from the response cache: nothing was spent (`usage` is zero)."""
    saved_usage: Usage | None = None
    """With `cached`: what the call whose reply was replayed spent, which this one saved."""
