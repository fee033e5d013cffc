"""Events, messages, tool calls and errors: the one protocol every part of Kestrel speaks."""

from kestrel.protocol.codec import (
    DecodeError,
    event_from_dict,
    event_to_dict,
    record_from_json,
    record_to_json,
)
from kestrel.protocol.events import *  # noqa: F403
from kestrel.protocol.events import __all__ as _events_all
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    Message,
    ModelRequest,
    StopReason,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultTurn,
    ToolSpec,
    Usage,
    UserTurn,
)

__all__ = [
    *_events_all,
    "AssistantTurn",
    "Completion",
    "DecodeError",
    "Message",
    "ModelRequest",
    "StopReason",
    "StreamPart",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolResultTurn",
    "ToolSpec",
    "Usage",
    "UserTurn",
    "event_from_dict",
    "event_to_dict",
    "record_from_json",
    "record_to_json",
]
