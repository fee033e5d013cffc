"""Any OpenAI-compatible Chat Completions server (OpenAI, vLLM, llama.cpp, Ollama, OpenRouter).

Servers differ in what they accept; `EndpointCapabilities` (see `kestrel.models.endpoint`) says
how requests to this one are shaped, resolved from the user's choices and, where they leave
something to detection, one cheap probe of the server before the first request.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from kestrel.models.endpoint import (
    OPENAI_URL,
    EndpointCapabilities,
    EndpointChoices,
    MaxTokensField,
    kind_from_fingerprint,
    resolve,
)
from kestrel.models.endpoint_probe import detect
from kestrel.models.openai_errors import map_error
from kestrel.models.openai_reply import PROVIDER, ReplyBuilder
from kestrel.models.pricing import ModelPrice
from kestrel.protocol.errors import AuthenticationFailed
from kestrel.protocol.messages import (
    Message,
    ModelRequest,
    StreamPart,
    ToolResultTurn,
    ToolSpec,
    UserTurn,
)

__all__ = ["PROVIDER", "MaxTokensField", "OpenAICompatProvider", "build_params", "map_error"]

# Local servers accept any key, but the SDK refuses to start without one.
NO_KEY_PLACEHOLDER = "not-needed"

# What the SDK and its HTTP layer raise; JSONDecodeError is a malformed chunk in the stream.
_FAILURES = (openai.OpenAIError, httpx2.HTTPError, OSError, json.JSONDecodeError)


class OpenAICompatProvider:
    """Streams replies from a Chat Completions endpoint; retries are left to `models.retry`."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
        max_tokens_field: MaxTokensField | None = None,
        endpoint: EndpointChoices | None = None,
        capabilities: EndpointCapabilities | None = None,
    ) -> None:
        """Remember the settings; nothing is sent and no SDK client is made until first use.

        `endpoint` holds the user's choices (None: detect everything); `capabilities`, when
        given, is used as is and nothing is detected. `max_tokens_field` overrides the choice
        of the field that carries the output limit ("max_tokens" for llama.cpp and older servers).
        """
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._pricing = pricing
        choices = endpoint or EndpointChoices()
        if max_tokens_field is not None:
            choices = replace(choices, max_tokens_field=max_tokens_field)
        self._choices = choices
        self._capabilities = capabilities
        self._client: openai.AsyncOpenAI | None = None

    @property
    def model(self) -> str:
        """The model id, as priced and reported in usage."""
        return self._model

    @property
    def url(self) -> str:
        """The endpoint's base URL, as requests go to it."""
        base = self._base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
        return base.rstrip("/")

    async def capabilities(self) -> EndpointCapabilities:
        """How requests are shaped, resolved once; a probe runs only where detection needs it."""
        if self._capabilities is None:
            base = self._base_url or os.environ.get("OPENAI_BASE_URL")
            probe = self._choices.probe and self._choices.needs_kind
            api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
            found = await asyncio.to_thread(detect, base, api_key=api_key, probe=probe)
            self._capabilities = resolve(self._choices, found.kind, found.evidence)
        return self._capabilities

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
        """Stream text and tool-call deltas, then the completed message with its usage.

        Raises `StreamCut` when the server never finishes the reply and `EmptyReply` when it
        finishes one with nothing in it. A tool turn to a server that cannot stream tool calls
        is asked for whole and replayed as the same parts.
        """
        self._get_client()  # A missing key fails before the probe, not after it.
        caps = await self.capabilities()
        whole = bool(request.tools) and not caps.stream_tool_calls
        params = build_params(self._model, request, capabilities=caps, stream=not whole)
        url = f"{self.url}/chat/completions"
        started = time.perf_counter()
        reply = ReplyBuilder()
        shown = False
        try:
            client = self._get_client()
            if whole:
                response: ChatCompletion = await client.chat.completions.create(**params)
                parts = reply.take_whole(response)
            else:
                chunks: openai.AsyncStream[
                    ChatCompletionChunk
                ] = await client.chat.completions.create(**params)
                try:
                    async for chunk in chunks:
                        for part in reply.feed(chunk):
                            shown = True
                            yield part
                finally:
                    await chunks.close()
                parts = []
        except _FAILURES as err:
            raise map_error(err, url=url, mid_reply=shown) from err
        for part in parts:
            yield part
        reply.check_finished(url, shown=shown)
        self._learn(reply.fingerprint)
        yield reply.completion(self._model, (time.perf_counter() - started) * 1000, self._pricing)

    def _learn(self, fingerprint: str | None) -> None:
        """A server the probe could not name may name itself in its replies' fingerprint."""
        caps = self._capabilities
        if caps is None or caps.source("kind") != "default":
            return
        kind = kind_from_fingerprint(fingerprint)
        if kind is not None:
            evidence = f"its system_fingerprint {fingerprint} is a llama.cpp build"
            self._capabilities = resolve(self._choices, kind, evidence)


def build_params(
    model: str,
    request: ModelRequest,
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    *,
    capabilities: EndpointCapabilities | None = None,
    stream: bool = True,
) -> dict[str, Any]:
    """The Chat Completions body for `request`, shaped by `capabilities`.

    Without `capabilities`: streamed, usage asked for, the limit sent as `max_tokens_field`.
    """
    caps = capabilities or EndpointCapabilities(max_tokens_field=max_tokens_field)
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_wire_message(message) for message in request.messages)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": stream,
        caps.max_tokens_field: request.max_output_tokens,
    }
    if stream and caps.usage:
        params["stream_options"] = {"include_usage": True}
    if request.tools:
        params["tools"] = [_wire_tool(spec) for spec in request.tools]
        if caps.tool_choice != "omit":
            params["tool_choice"] = caps.tool_choice
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
    # An empty string, not the documented null: llama-cpp-python refuses null content with a 500,
    # and every server tried (OpenAI's format, llama.cpp, vLLM) takes "" for a tools-only turn.
    return {"role": "assistant", "content": message.text, "tool_calls": calls}
