"""One Chat Completions reply, streamed chunk by chunk or whole, turned into Kestrel's parts.

A reply counts only when the server said it was finished: a stream that just stops (llama.cpp
does that on a context overflow, with HTTP 200 and no chunk at all) raises `StreamCut`, and a
finished reply with neither text nor a tool call raises `EmptyReply`. Neither ever becomes a turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from kestrel.models.pricing import ModelPrice, price
from kestrel.protocol.errors import EmptyReply, StreamCut
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    StopReason,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

PROVIDER = "openai"

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

CUT_REASON = (
    "the server ended the stream before the reply was finished (no finish reason) — often a "
    "context overflow on llama.cpp"
)
"""Why a reply without a finish reason is refused, in the words users see."""


@dataclass(slots=True)
class _PendingCall:
    call_id: str
    name: str
    arguments: str = ""


class ReplyBuilder:
    """Builds one assistant message from streamed chunks (or a whole response), yielding parts."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[_PendingCall] = []
        self.call_index: dict[int, int] = {}  # the server's tool call index -> ours
        self.usage: CompletionUsage | None = None
        self.finish_reason: str | None = None
        self.fingerprint: str | None = None

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamPart]:
        """Take one chunk; return the parts it adds to the stream."""
        if chunk.usage is not None:
            self.usage = chunk.usage
        self.fingerprint = chunk.system_fingerprint or self.fingerprint
        parts: list[StreamPart] = []
        # Usage-only chunks have no choices; we ask for one choice, so only index 0 matters.
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            for text in (delta.content, delta.refusal):
                if text:
                    self.text.append(text)
                    parts.append(TextDelta(text=text))
            for position, call in enumerate(delta.tool_calls or ()):
                parts.append(self._tool_delta(position, call))
        return parts

    def take_whole(self, response: ChatCompletion) -> list[StreamPart]:
        """Take a non-streamed response; return the same parts its stream would have held."""
        self.usage = response.usage
        self.fingerprint = response.system_fingerprint
        parts: list[StreamPart] = []
        for choice in response.choices or ():
            if choice.index != 0:
                continue
            self.finish_reason = choice.finish_reason or None
            message = choice.message
            for text in (message.content, message.refusal):
                if text:
                    self.text.append(text)
                    parts.append(TextDelta(text=text))
            for call in message.tool_calls or ():
                function = getattr(call, "function", None)
                index = len(self.calls)
                call_id = call.id or f"call_{index}"
                name = function.name if function else ""
                arguments = (function.arguments if function else "") or ""
                self.calls.append(_PendingCall(call_id, name, arguments))
                parts.append(
                    ToolCallDelta(
                        index=index, call_id=call_id, name=name, arguments_delta=arguments
                    )
                )
        return parts

    def _tool_delta(self, position: int, call: ChoiceDeltaToolCall) -> ToolCallDelta:
        # Some servers omit `index` when they send whole calls in one chunk; fall back to order.
        server_index = getattr(call, "index", None)
        if not isinstance(server_index, int):
            server_index = position
        arguments = (call.function.arguments if call.function else None) or ""
        index = self.call_index.get(server_index)
        if index is None:
            index = len(self.calls)
            self.call_index[server_index] = index
            # Not every local server sends call ids; the loop needs one to pair the result.
            call_id = call.id or f"call_{index}"
            name = (call.function.name if call.function else None) or ""
            self.calls.append(_PendingCall(call_id, name, arguments))
            return ToolCallDelta(index=index, call_id=call_id, name=name, arguments_delta=arguments)
        self.calls[index].arguments += arguments
        return ToolCallDelta(index=index, arguments_delta=arguments)

    def check_finished(self, url: str, *, shown: bool) -> None:
        """Raise `StreamCut` for a reply the server never finished, `EmptyReply` for one with
        nothing in it; `shown` says whether parts of it already reached the caller."""
        if self.finish_reason is None:
            cut = "the stream was cut mid-reply: " if shown else ""
            raise StreamCut(f"{PROVIDER}: {cut}{CUT_REASON}; {url}", provider=PROVIDER)
        if not "".join(self.text).strip() and not self.calls:
            hint = " (the output limit was reached first)" if self.finish_reason == "length" else ""
            raise EmptyReply(
                f"{PROVIDER}: the server finished a reply with neither text nor a tool call"
                f'{hint} (finish reason "{self.finish_reason}"); {url}',
                provider=PROVIDER,
            )

    def completion(
        self, model: str, latency_ms: float, pricing: Mapping[str, ModelPrice] | None
    ) -> Completion:
        """The finished message with its metered usage (unreported when the server sent none)."""
        calls = tuple(
            ToolCall(id=call.call_id, name=call.name, arguments=call.arguments or "{}")
            for call in self.calls
        )
        usage = _usage(self.usage, model, latency_ms)
        cost, priced = price(usage, model, pricing)
        stop: StopReason = _FINISH_REASONS.get(self.finish_reason or "", "other")
        if stop == "end_turn" and calls:
            # Some local servers say "stop" after a tool call; the calls are what matters.
            stop = "tool_use"
        return Completion(
            message=AssistantTurn(text="".join(self.text), tool_calls=calls),
            usage=replace(usage, cost_usd=cost, priced=priced),
            stop_reason=stop,
        )


def _usage(reported: CompletionUsage | None, model: str, latency_ms: float) -> Usage:
    if reported is None:
        return Usage(model=model, latency_ms=latency_ms, tokens_reported=False)
    prompt = int(reported.prompt_tokens or 0)
    details = reported.prompt_tokens_details
    cached = int((details.cached_tokens if details else None) or 0)
    # prompt_tokens includes the cached ones; ours counts them apart, as Anthropic does.
    return Usage(
        model=model,
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(reported.completion_tokens or 0),
        cache_read_tokens=cached,
        latency_ms=latency_ms,
    )
