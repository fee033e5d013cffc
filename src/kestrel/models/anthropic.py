"""Claude models through the official Anthropic SDK, streamed, with prompt caching."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anthropic
import httpx2
from anthropic import types as wire

from kestrel.models.endpoint_probe import describe_http_error
from kestrel.models.http_errors import connection_error, error_for_status, retry_after_seconds
from kestrel.models.pricing import ModelPrice, price
from kestrel.protocol.errors import (
    AuthenticationFailed,
    EmptyReply,
    ProviderError,
    ServerError,
    StreamCut,
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

PROVIDER = "anthropic"
ANTHROPIC_URL = "https://api.anthropic.com"
"""Where the provider goes when neither `base_url` nor `ANTHROPIC_BASE_URL` is set."""

# What the SDK and its HTTP layer raise; JSONDecodeError is a malformed event in the stream.
_FAILURES = (anthropic.AnthropicError, httpx2.HTTPError, OSError, json.JSONDecodeError)

_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}

_EventStream = anthropic.AsyncStream[wire.RawMessageStreamEvent]

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    # The reply was cut off because the context window filled: the same remedy as max_tokens.
    "model_context_window_exceeded": "max_tokens",
}

# The HTTP status each error type carries, for errors that arrive inside a 200 event stream.
_ERROR_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicProvider:
    """Streams replies from a Claude model; retries are left to `kestrel.models.retry`."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        """Remember the settings; the SDK client is made on first use, never at construction."""
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._pricing = pricing
        self._client: anthropic.AsyncAnthropic | None = None

    @property
    def model(self) -> str:
        """The model id, as priced and reported in usage."""
        return self._model

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            # max_retries=0: the SDK would retry silently and could replay a half-streamed reply.
            client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self._base_url, max_retries=0
            )
            # Without any credential the SDK fails each request with a bare TypeError.
            if client.api_key is None and client.auth_token is None and client.credentials is None:
                raise AuthenticationFailed(
                    "no Anthropic credentials: pass api_key or set ANTHROPIC_API_KEY",
                    provider=PROVIDER,
                )
            self._client = client
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections; the provider makes a new client if used again."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    @property
    def url(self) -> str:
        """The endpoint's base URL, as requests go to it."""
        base = self._base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL
        return base.rstrip("/")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream text and tool-call deltas, then the completed message with its usage.

        Raises `StreamCut` when the stream ends before `message_stop` and `EmptyReply` when the
        finished message holds neither text nor a tool call.
        """
        params = build_params(self._model, request)
        started = time.perf_counter()
        reply = _Reply()
        url = f"{self.url}/v1/messages"
        shown = False
        try:
            client = self._get_client()
            events: _EventStream = await client.messages.create(**params)
            try:
                async for event in events:
                    for part in reply.feed(event):
                        shown = True
                        yield part
            finally:
                await events.close()
        except _FAILURES as err:
            raise map_error(err, url=url, mid_reply=shown) from err
        reply.check_finished(url, shown=shown)
        yield reply.completion(self._model, (time.perf_counter() - started) * 1000, self._pricing)


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    """The Messages API body for `request`, with cache breakpoints on its stable prefix."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_output_tokens,
        "messages": _wire_messages(request.messages),
        "stream": True,
    }
    # Breakpoints, four as the API allows: last tool, system prompt, the turn before the newest,
    # and the newest turn. The newest one writes the cache that the next call, whose prefix is
    # this whole request, reads; the one before it still hits if the newest was not cached.
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        tools = [_wire_tool(spec) for spec in request.tools]
        tools[-1]["cache_control"] = _EPHEMERAL
        params["tools"] = tools
    messages: list[dict[str, Any]] = params["messages"]
    for message in messages[-2:]:
        message["content"][-1]["cache_control"] = _EPHEMERAL
    if request.temperature is not None:
        # Not a named argument of the SDK's create(); sent as given for models that accept it.
        params["extra_body"] = {"temperature": request.temperature}
    return params


def _wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


def _wire_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Messages API turns; consecutive user-side turns (tool results, text) share one message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AssistantTurn) else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, UserTurn):
        return [{"type": "text", "text": message.text}] if message.text else []
    if isinstance(message, ToolResultTurn):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return blocks


def _tool_input(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object; text that is not a JSON object is kept, wrapped."""
    try:
        return call.parsed_arguments()
    except ValueError:
        # The model wrote malformed JSON earlier; echo it back rather than fail the whole turn.
        return {"raw_arguments": call.arguments}


@dataclass(slots=True)
class _PendingCall:
    call_id: str
    name: str
    # The input arrives as input_json_delta events; the start block's `input` is the fallback.
    start_input: str
    streamed: str = ""


class _Reply:
    """Builds one assistant message from the raw stream events, yielding our parts as it goes."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[_PendingCall] = []
        self.call_index: dict[int, int] = {}  # content block index -> tool call index
        self.counts: dict[str, int] = {}
        self.stop_reason: StopReason = "other"
        self.finished = False

    def feed(self, event: object) -> list[StreamPart]:
        """Take one raw SSE event; return the parts it adds to the stream."""
        if isinstance(event, wire.RawMessageStartEvent):
            self._count(event.message.usage.model_dump())
        elif isinstance(event, wire.RawContentBlockStartEvent):
            return self._start_block(event)
        elif isinstance(event, wire.RawContentBlockDeltaEvent):
            return self._delta(event)
        elif isinstance(event, wire.RawMessageDeltaEvent):
            if event.delta.stop_reason is not None:
                self.stop_reason = _STOP_REASONS.get(event.delta.stop_reason, "other")
            self._count(event.usage.model_dump())
        elif isinstance(event, wire.RawMessageStopEvent):
            self.finished = True
        return []

    def _count(self, usage: dict[str, Any]) -> None:
        # message_delta carries cumulative totals, so a later value replaces an earlier one.
        for key, value in usage.items():
            if isinstance(value, int):
                self.counts[key] = value

    def _start_block(self, event: wire.RawContentBlockStartEvent) -> list[StreamPart]:
        block = event.content_block
        if isinstance(block, wire.ToolUseBlock):
            index = len(self.calls)
            self.call_index[event.index] = index
            self.calls.append(_PendingCall(block.id, block.name, json.dumps(block.input)))
            return [ToolCallDelta(index=index, call_id=block.id, name=block.name)]
        if isinstance(block, wire.TextBlock) and block.text:
            self.text.append(block.text)
            return [TextDelta(text=block.text)]
        return []

    def _delta(self, event: wire.RawContentBlockDeltaEvent) -> list[StreamPart]:
        delta = event.delta
        if isinstance(delta, wire.TextDelta):
            self.text.append(delta.text)
            return [TextDelta(text=delta.text)]
        if isinstance(delta, wire.InputJSONDelta) and event.index in self.call_index:
            index = self.call_index[event.index]
            self.calls[index].streamed += delta.partial_json
            return [ToolCallDelta(index=index, arguments_delta=delta.partial_json)]
        return []

    def check_finished(self, url: str, *, shown: bool) -> None:
        """Raise `StreamCut` for a stream without `message_stop`, `EmptyReply` for no content."""
        if not self.finished:
            cut = "the stream was cut mid-reply: " if shown else ""
            raise StreamCut(
                f"{PROVIDER}: {cut}the server ended the stream before the reply was finished "
                f"(no message_stop); {url}",
                provider=PROVIDER,
            )
        if not "".join(self.text).strip() and not self.calls:
            raise EmptyReply(
                f"{PROVIDER}: the server finished a reply with neither text nor a tool call "
                f'(stop reason "{self.stop_reason}"); {url}',
                provider=PROVIDER,
            )

    def completion(
        self, model: str, latency_ms: float, pricing: Mapping[str, ModelPrice] | None
    ) -> Completion:
        """The finished message with its metered usage."""
        calls = tuple(
            ToolCall(id=call.call_id, name=call.name, arguments=call.streamed or call.start_input)
            for call in self.calls
        )
        usage = Usage(
            model=model,
            input_tokens=self.counts.get("input_tokens", 0),
            output_tokens=self.counts.get("output_tokens", 0),
            cache_write_tokens=self.counts.get("cache_creation_input_tokens", 0),
            cache_read_tokens=self.counts.get("cache_read_input_tokens", 0),
            latency_ms=latency_ms,
        )
        cost, priced = price(usage, model, pricing)
        return Completion(
            message=AssistantTurn(text="".join(self.text), tool_calls=calls),
            usage=replace(usage, cost_usd=cost, priced=priced),
            stop_reason=self.stop_reason,
        )


def map_error(
    err: BaseException, *, url: str | None = None, mid_reply: bool = False
) -> ProviderError:
    """The Kestrel error for anything the SDK or its HTTP layer raised while asking `url`."""
    if isinstance(err, ProviderError):
        return err
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        if status < 400:
            # An `event: error` inside a 200 stream: the error type says what went wrong.
            status = _ERROR_TYPE_STATUS.get(str(err.type or ""), 500)
        message = err.api_message or err.message
        return error_for_status(
            status,
            message,
            provider=PROVIDER,
            retry_after=retry_after_seconds(err.response.headers),
            context_too_long="prompt is too long" in message.lower(),
            url=url,
        )
    if isinstance(err, anthropic.APIConnectionError | httpx2.HTTPError | OSError):
        return connection_error(PROVIDER, url, _reason(err), mid_reply=mid_reply)
    if isinstance(err, anthropic.CredentialsError):
        return AuthenticationFailed(f"{PROVIDER}: {err}", provider=PROVIDER)
    if isinstance(err, ValueError):
        # A malformed event (bad JSON, unexpected shape): the server's fault, worth a retry.
        return ServerError(f"{PROVIDER} sent a malformed stream: {err}", provider=PROVIDER)
    return ProviderError(f"{PROVIDER}: {type(err).__name__}: {err}", provider=PROVIDER)


def _reason(err: BaseException) -> str:
    """Why the connection failed: the SDK's own error only says "Connection error."."""
    if isinstance(err, anthropic.APITimeoutError):
        return "timed out"
    cause = err.__cause__ if isinstance(err, anthropic.APIConnectionError) else err
    if isinstance(cause, httpx2.RemoteProtocolError):
        return "the server closed the connection"
    if isinstance(cause, httpx2.HTTPError | OSError):
        return describe_http_error(cause)
    return str(err).rstrip(".").lower() or "connection error"
