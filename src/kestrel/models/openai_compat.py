"""Any OpenAI-compatible Chat Completions server (OpenAI, vLLM, llama.cpp, Ollama, OpenRouter)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx2
import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from kestrel.models.http_errors import error_for_status, retry_after_seconds
from kestrel.models.pricing import ModelPrice, price
from kestrel.protocol.errors import (
    AuthenticationFailed,
    ContextTooLong,
    NetworkError,
    ProviderError,
    ServerError,
)
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

PROVIDER = "openai"

# Local servers accept any key, but the SDK refuses to start without one.
NO_KEY_PLACEHOLDER = "not-needed"

# What the SDK and its HTTP layer raise; JSONDecodeError is a malformed chunk in the stream.
_FAILURES = (openai.OpenAIError, httpx2.HTTPError, OSError, json.JSONDecodeError)

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class OpenAICompatProvider:
    """Streams replies from a Chat Completions endpoint; retries are left to `models.retry`."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
        max_tokens_field: MaxTokensField = "max_completion_tokens",
    ) -> None:
        """Remember the settings; the SDK client is made on first use, never at construction.

        `max_tokens_field` is "max_tokens" for older servers that do not know the newer name.
        """
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._pricing = pricing
        self._max_tokens_field = max_tokens_field
        self._client: openai.AsyncOpenAI | None = None

    @property
    def model(self) -> str:
        """The model id, as priced and reported in usage."""
        return self._model

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
            if not api_key and (self._base_url or os.environ.get("OPENAI_BASE_URL")):
                api_key = NO_KEY_PLACEHOLDER
            if not api_key:
                raise AuthenticationFailed(
                    "no API key: pass api_key or set OPENAI_API_KEY", provider=PROVIDER
                )
            # max_retries=0: the SDK would retry silently and could replay a half-streamed reply.
            self._client = openai.AsyncOpenAI(
                api_key=api_key, base_url=self._base_url, max_retries=0
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections; the provider makes a new client if used again."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream text and tool-call deltas, then the completed message with its usage."""
        params = build_params(self._model, request, self._max_tokens_field)
        started = time.perf_counter()
        reply = _Reply()
        try:
            client = self._get_client()
            chunks: openai.AsyncStream[ChatCompletionChunk] = await client.chat.completions.create(
                **params
            )
            try:
                async for chunk in chunks:
                    for part in reply.feed(chunk):
                        yield part
            finally:
                await chunks.close()
        except _FAILURES as err:
            raise map_error(err) from err
        yield reply.completion(self._model, (time.perf_counter() - started) * 1000, self._pricing)


def build_params(
    model: str, request: ModelRequest, max_tokens_field: MaxTokensField = "max_completion_tokens"
) -> dict[str, Any]:
    """The Chat Completions body for `request`, streamed with usage in the last chunk."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_wire_message(message) for message in request.messages)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        max_tokens_field: request.max_output_tokens,
    }
    if request.tools:
        params["tools"] = [_wire_tool(spec) for spec in request.tools]
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def _wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }


def _wire_message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserTurn):
        return {"role": "user", "content": message.text}
    if isinstance(message, ToolResultTurn):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.text}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments or "{}"},
        }
        for call in message.tool_calls
    ]
    # null content is the documented form for a turn that only calls tools.
    return {"role": "assistant", "content": message.text or None, "tool_calls": calls}


@dataclass(slots=True)
class _PendingCall:
    call_id: str
    name: str
    arguments: str = ""


class _Reply:
    """Builds one assistant message from streamed chunks, yielding our parts as it goes."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[_PendingCall] = []
        self.call_index: dict[int, int] = {}  # the server's tool call index -> ours
        self.usage: CompletionUsage | None = None
        self.finish_reason: str | None = None

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamPart]:
        """Take one chunk; return the parts it adds to the stream."""
        if chunk.usage is not None:
            self.usage = chunk.usage
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

    def completion(
        self, model: str, latency_ms: float, pricing: Mapping[str, ModelPrice] | None
    ) -> Completion:
        """The finished message with its metered usage (zeros when the server sent none)."""
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


def map_error(err: BaseException) -> ProviderError:
    """The Kestrel error for anything the SDK or its HTTP layer raised."""
    if isinstance(err, ProviderError):
        return err
    if isinstance(err, openai.APIStatusError):
        return error_for_status(
            err.status_code,
            _body_message(err),
            provider=PROVIDER,
            retry_after=retry_after_seconds(err.response.headers),
            context_too_long=_says_context_too_long(err),
        )
    if isinstance(err, openai.APIConnectionError | httpx2.HTTPError | OSError):
        return NetworkError(f"{PROVIDER}: {err}", provider=PROVIDER)
    if isinstance(err, openai.APIError):
        return _stream_error(err)
    if isinstance(err, ValueError):
        # A malformed chunk (bad JSON, unexpected shape): the server's fault, worth a retry.
        return ServerError(f"{PROVIDER} sent a malformed stream: {err}", provider=PROVIDER)
    return ProviderError(f"{PROVIDER}: {type(err).__name__}: {err}", provider=PROVIDER)


def _body_message(err: openai.APIError) -> str:
    body = err.body
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) and message else err.message


def _says_context_too_long(err: openai.APIError) -> bool:
    # OpenAI sends a code; vLLM and llama.cpp only say it in words or in the error type.
    message = err.message.lower()
    return (
        err.code == "context_length_exceeded"
        or err.type == "exceed_context_size_error"
        or "maximum context length" in message
        or "context size" in message
    )


def _stream_error(err: openai.APIError) -> ProviderError:
    """An error object sent inside a 200 stream; its code is an HTTP status on some routers."""
    if _says_context_too_long(err):
        return ContextTooLong(f"{PROVIDER}: {err.message}", provider=PROVIDER)
    code = err.code or ""
    status = int(code) if code.isdigit() else 500
    if err.type == "rate_limit_exceeded" or code == "rate_limit_exceeded":
        status = 429
    return error_for_status(status, err.message, provider=PROVIDER)
