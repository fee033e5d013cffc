"""A model that replays a JSON script: for tests, demos, and users testing their hooks and tools.

The script is a JSON list of model turns, each `{"text": "...", "tool_calls": [{"name": "...",
"arguments": {...}}]}` with either key optional. Turn N of the script answers the request whose
conversation already holds N assistant turns, so a resumed session picks up where it stopped. A
request after the last turn raises `ScriptExhausted`: a script that ends too early is a broken
test, and saying nothing would pass for a finished task.

Optional keys help tests: `usage` (`input_tokens`, `output_tokens`, `cost_usd`) overrides the
estimated usage, `delay_s` waits before answering, and `cut: true` ends the reply as one the output
cap cut off.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kestrel.protocol.errors import ConfigError, ProviderError
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    StopReason,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultTurn,
    Usage,
    UserTurn,
    model_turns,
)
from kestrel.protocol.oserrors import error_text

_TURN_KEYS = {"text", "tool_calls", "usage", "delay_s", "cut"}
_USAGE_KEYS = {"input_tokens", "output_tokens", "cost_usd"}
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedTurn:
    """One reply of the scripted model."""

    text: str = ""
    tool_calls: tuple[tuple[str, str], ...] = ()
    """(name, arguments as JSON text) pairs; text lets a script send malformed arguments."""
    usage: dict[str, float] | None = None
    delay_s: float = 0.0
    cut: bool = False
    """True: the reply ends as one the output cap cut off (stop reason `max_tokens`)."""


def say(text: str) -> ScriptedTurn:
    """A turn that only says `text`."""
    return ScriptedTurn(text=text)


def call(name: str, text: str = "", /, **arguments: Any) -> ScriptedTurn:
    """A turn that calls one tool with keyword arguments."""
    return ScriptedTurn(text=text, tool_calls=((name, json.dumps(arguments)),))


class ScriptExhausted(ProviderError):
    """The scripted model was asked for a reply after its script's last turn."""


class ScriptedProvider:
    """Replays scripted turns; the model id is `scripted` and every call costs nothing."""

    def __init__(
        self, turns: Sequence[ScriptedTurn], *, model: str = "scripted", source: str = ""
    ) -> None:
        self._turns = tuple(turns)
        self._model = model
        self._source = source

    @classmethod
    def from_file(cls, path: Path) -> ScriptedProvider:
        """Load a script file; a malformed one is a `ConfigError` naming the file and turn."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"{path}: scripted model file not found") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{path}: cannot read scripted model file: {error_text(exc)}"
            ) from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
        return cls(parse_script(data, source=str(path)), source=str(path))

    @property
    def model(self) -> str:
        """Always `scripted` unless the script was given another name."""
        return self._model

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Answer with the turn whose index is the number of assistant turns so far."""
        started = time.perf_counter()
        index = model_turns(request.messages)  # turns folded by a compaction count too
        if request.metadata.get("purpose") == "compaction":  # not a turn of the script
            turn = ScriptedTurn(text=f"[scripted summary of {index} earlier model turns]")
        elif index < len(self._turns):
            turn = self._turns[index]
        else:
            count = len(self._turns)
            script = f"script {self._source}" if self._source else "the script"
            raise ScriptExhausted(
                f"the scripted model has no more replies ({script} has "
                f"{count} {'reply' if count == 1 else 'replies'})",
                provider="scripted",
            )
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        for piece in _pieces(turn.text):
            yield TextDelta(text=piece)
        calls = []
        for i, (name, arguments) in enumerate(turn.tool_calls):
            call_id = f"call_{index}_{i}"
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
            yield ToolCallDelta(index=i, call_id=call_id, name=name)
            for piece in _pieces(arguments):
                yield ToolCallDelta(index=i, arguments_delta=piece)
        message = AssistantTurn(text=turn.text, tool_calls=tuple(calls))
        usage = _usage(self._model, request, message, turn, time.perf_counter() - started)
        stop: StopReason = "max_tokens" if turn.cut else "tool_use" if calls else "end_turn"
        yield Completion(message=message, usage=usage, stop_reason=stop)


def parse_script(data: Any, *, source: str = "script") -> list[ScriptedTurn]:
    """Validate a decoded script; errors name the source and the turn."""
    if not isinstance(data, list):
        raise ConfigError(f"{source}: a script must be a JSON list of turns")
    return [_parse_turn(item, f"{source}: turn {i}") for i, item in enumerate(data)]


def _parse_turn(item: Any, where: str) -> ScriptedTurn:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: a turn must be an object with 'text' and/or 'tool_calls'")
    unknown = set(item) - _TURN_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_TURN_KEYS)}"
        )
    text = item.get("text", "")
    if not isinstance(text, str):
        raise ConfigError(f"{where}: 'text' must be a string")
    raw_calls = item.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ConfigError(f"{where}: 'tool_calls' must be a list")
    calls = tuple(_parse_call(c, f"{where}: tool_calls[{j}]") for j, c in enumerate(raw_calls))
    usage = item.get("usage")
    if usage is not None and (
        not isinstance(usage, dict)
        or set(usage) - _USAGE_KEYS
        or not all(isinstance(v, int | float) for v in usage.values())
    ):
        raise ConfigError(f"{where}: 'usage' must map {sorted(_USAGE_KEYS)} to numbers")
    delay = item.get("delay_s", 0.0)
    if not isinstance(delay, int | float) or delay < 0:
        raise ConfigError(f"{where}: 'delay_s' must be a non-negative number")
    cut = item.get("cut", False)
    if not isinstance(cut, bool):
        raise ConfigError(f"{where}: 'cut' must be true or false")
    return ScriptedTurn(text=text, tool_calls=calls, usage=usage, delay_s=float(delay), cut=cut)


def _parse_call(item: Any, where: str) -> tuple[str, str]:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ConfigError(f"{where}: a tool call needs a string 'name'")
    arguments = item.get("arguments", {})
    # A string is sent as the raw arguments text, so scripts can exercise malformed JSON.
    return item["name"], arguments if isinstance(arguments, str) else json.dumps(arguments)


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(
    model: str, request: ModelRequest, message: AssistantTurn, turn: ScriptedTurn, elapsed: float
) -> Usage:
    """Estimate tokens at four characters each, unless the script says otherwise."""
    given = turn.usage or {}
    input_chars = len(request.system) + sum(_message_chars(m) for m in request.messages)
    output_chars = len(message.text) + sum(
        len(c.name) + len(c.arguments) for c in message.tool_calls
    )
    return Usage(
        model=model,
        input_tokens=int(given.get("input_tokens", input_chars // _CHARS_PER_TOKEN)),
        output_tokens=int(given.get("output_tokens", output_chars // _CHARS_PER_TOKEN)),
        cost_usd=float(given.get("cost_usd", 0.0)),
        latency_ms=elapsed * 1000,
        priced=True,  # a scripted reply costs nothing: zero is its real price
    )


def _message_chars(message: UserTurn | AssistantTurn | ToolResultTurn) -> int:
    if isinstance(message, AssistantTurn):
        return len(message.text) + sum(len(c.arguments) for c in message.tool_calls)
    return len(message.text) if isinstance(message, UserTurn) else len(message.content)
