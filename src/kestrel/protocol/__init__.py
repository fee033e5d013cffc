"""Events, messages, tool calls and errors: the one protocol every part of Kestrel speaks.

Every name of `codec`, `messages` and `events` can be imported from here; each is imported
from its module when first used, so that importing `kestrel.protocol.errors` (every command
does) does not build the event types and their JSON codec.
"""

from __future__ import annotations

import importlib
from typing import Any

_CODEC = {"DecodeError", "event_from_dict", "event_to_dict", "record_from_json", "record_to_json"}
_MESSAGES = {
    "AssistantTurn",
    "Completion",
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
}


def __getattr__(name: str) -> Any:
    if name in _CODEC:
        module = "codec"
    elif name in _MESSAGES:
        module = "messages"
    else:
        events = importlib.import_module(f"{__name__}.events")
        if name not in events.__all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(events, name)
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    events = importlib.import_module(f"{__name__}.events")
    return sorted({*_CODEC, *_MESSAGES, *events.__all__})
