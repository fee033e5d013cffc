"""Conversation messages and the parts of a streamed model reply: pure, frozen data."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

JSONValue = Any
"""A value that survives `json.dumps` / `json.loads` unchanged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model wrote it; `arguments` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, JSONValue]:
        """The arguments as a dict; raises `ValueError` when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about one tool: its name, purpose and JSON Schema of arguments."""

    name: str
    description: str
    input_schema: dict[str, JSONValue]


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Metered cost of one model call; token counts follow the provider's own report."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    priced: bool = True
    """False when the model is missing from the pricing table, so `cost_usd` is a lower bound."""
    tokens_reported: bool = True
    """False when the server reported no usage: the token counts are Kestrel's estimate."""

    @property
    def total_input_tokens(self) -> int:
        """Every input token, whether read from cache, written to it, or neither."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTurn:
    """Text the person (or a frontend on their behalf) sent to the model."""

    role: Literal["user"] = "user"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantTurn:
    """What the model answered: text and zero or more tool calls."""

    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultTurn:
    """The result of one tool call, as the model will see it."""

    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False


Message = UserTurn | AssistantTurn | ToolResultTurn


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything a provider needs for one call."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int = 8192
    temperature: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the model's text as it streams."""

    part: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of one tool call as it streams; `index` orders parallel calls."""

    part: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The end of one streamed reply: the whole message, its usage and why it stopped."""

    part: Literal["completion"] = "completion"
    message: AssistantTurn
    usage: Usage
    stop_reason: StopReason = "end_turn"
    cached: bool = False
    """True when the reply was replayed from the response cache: `usage` is what the original
    call spent, not what this one did (it spent nothing)."""


StreamPart = TextDelta | ToolCallDelta | Completion


COMPACTED_TAG = "compacted-history"
"""The tag of the user turn that stands for compacted turns: `<compacted-history turns="N">`."""
_COMPACTED_TURNS = re.compile(rf'<{COMPACTED_TAG} turns="(\d+)">')


def model_turns(messages: Sequence[Message]) -> int:
    """How many model turns a conversation holds, counting those folded into a compacted turn."""
    count = 0
    for message in messages:
        if isinstance(message, AssistantTurn):
            count += 1
        elif isinstance(message, UserTurn) and (found := _COMPACTED_TURNS.match(message.text)):
            count += int(found.group(1))
    return count
