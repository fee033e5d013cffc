"""Endpoint capabilities and broken replies, with the real SDK against a loopback server."""

from __future__ import annotations

from typing import Any

import pytest
from wire_server import (
    Reply,
    SleepRecorder,
    WireServer,
    collect,
    gpt_chunk,
    gpt_usage,
    gpt_whole,
    json_reply,
    model_list,
    openai_sse,
)

from kestrel.models.endpoint import EndpointCapabilities, EndpointChoices
from kestrel.models.openai_compat import OpenAICompatProvider
from kestrel.models.retry import RetryPolicy, stream_with_retry
from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    EmptyReply,
    NetworkError,
    ProviderError,
    StreamCut,
)
from kestrel.protocol.messages import (
    Completion,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    UserTurn,
)

NO_JITTER = RetryPolicy(jitter=0.0)
READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
HELLO = ModelRequest(system="", messages=(UserTurn(text="Say hello."),))
OPEN = ModelRequest(system="", messages=(UserTurn(text="Open a.py"),), tools=(READ,))


def local(wire: WireServer, **kwargs: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider("local-model", base_url=f"{wire.url}/v1", **kwargs)


def chat_url(wire: WireServer) -> str:
    return f"{wire.url}/v1/chat/completions"


def empty_stream() -> Reply:
    """What llama.cpp answers on a context overflow: HTTP 200, an event stream, no event."""
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=(), stream=True)


def hello() -> Reply:
    return openai_sse([gpt_chunk({"content": "Hello"}), gpt_chunk({}, "stop"), gpt_usage(9, 2)])


async def test_empty_200_stream_is_a_stream_cut_retried_exactly_once(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    wire.push(empty_stream(), empty_stream(), hello())
    retried: list[type[ProviderError]] = []

    with pytest.raises(StreamCut) as caught:
        await collect(
            stream_with_retry(
                local(wire),
                HELLO,
                policy=NO_JITTER,
                sleep=sleep,
                on_retry=lambda _n, _d, e: retried.append(type(e)),
            )
        )

    message = str(caught.value)
    assert "no finish reason" in message and "context overflow on llama.cpp" in message
    assert message.endswith(chat_url(wire)) and "mid-reply" not in message
    assert len(wire.received) == 2 and retried == [StreamCut]


async def test_a_second_try_that_answers_is_used(wire: WireServer, sleep: SleepRecorder) -> None:
    wire.push(empty_stream(), hello())

    parts = await collect(stream_with_retry(local(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert parts[0] == TextDelta(text="Hello") and isinstance(parts[-1], Completion)
    assert sleep.delays == [1.0]


async def test_stream_without_finish_reason_after_text_is_cut_mid_reply(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    wire.push(openai_sse([gpt_chunk({"content": "Hel"})]), hello())
    seen: list[object] = []

    with pytest.raises(StreamCut) as caught:
        async for part in stream_with_retry(local(wire), HELLO, sleep=sleep):
            seen.append(part)

    assert seen == [TextDelta(text="Hel")]
    assert "the stream was cut mid-reply" in str(caught.value)
    assert len(wire.received) == 1 and sleep.delays == []


async def test_dropped_connection_after_text_says_cut_mid_reply(wire: WireServer) -> None:
    cut = openai_sse([gpt_chunk({"content": "Hel"})], done=False)
    wire.push(Reply(headers=cut.headers, chunks=cut.chunks, stream=True, drop=True))

    with pytest.raises(NetworkError) as caught:
        await collect(local(wire).stream(HELLO))

    assert "the stream was cut mid-reply" in str(caught.value)
    assert chat_url(wire) in str(caught.value)


async def test_finished_reply_with_nothing_in_it_is_an_empty_reply_retried_once(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    nothing = openai_sse([gpt_chunk({"role": "assistant", "content": ""}), gpt_chunk({}, "stop")])
    wire.push(nothing, nothing, hello())

    with pytest.raises(EmptyReply) as caught:
        await collect(stream_with_retry(local(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert 'finish reason "stop"' in str(caught.value) and chat_url(wire) in str(caught.value)
    assert len(wire.received) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 501])
async def test_non_retryable_status_fails_at_once_with_url_and_message(
    wire: WireServer, sleep: SleepRecorder, status: int
) -> None:
    body = {"error": {"message": f"the server says no ({status})", "type": "x", "code": None}}
    wire.push(json_reply(status, body), hello())

    with pytest.raises(ProviderError) as caught:
        await collect(stream_with_retry(local(wire), HELLO, sleep=sleep))

    assert isinstance(caught.value, BadRequest | AuthenticationFailed)
    assert not caught.value.retryable
    assert f"from {chat_url(wire)}: the server says no ({status})" in str(caught.value)
    assert len(wire.received) == 1 and sleep.delays == []


async def test_tool_turn_falls_back_to_a_whole_reply_when_set(wire: WireServer) -> None:
    call = ("call_7", "read_file", '{"path": "a.py"}')
    wire.push(gpt_whole("Reading.", tool_calls=(call,), finish_reason="tool_calls"))
    provider = local(wire, endpoint=EndpointChoices(stream_tool_calls=False))

    parts = await collect(provider.stream(OPEN))

    assert parts[:2] == [
        TextDelta(text="Reading."),
        ToolCallDelta(index=0, call_id="call_7", name="read_file", arguments_delta=call[2]),
    ]
    done = parts[2]
    assert isinstance(done, Completion) and len(parts) == 3
    assert done.message.tool_calls == (ToolCall(id="call_7", name="read_file", arguments=call[2]),)
    assert done.stop_reason == "tool_use"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (20, 5)
    assert done.usage.tokens_reported
    body = wire.received[0].body
    assert body["stream"] is False and "stream_options" not in body


async def test_llama_cpp_python_is_detected_and_gets_whole_tool_turns(wire: WireServer) -> None:
    wire.pages["/v1/models"] = model_list("me")
    wire.push(
        gpt_whole(None, tool_calls=(("c1", "read_file", "{}"),), usage=None),
        openai_sse([gpt_chunk({"content": "ok"}), gpt_chunk({}, "stop")]),
    )
    provider = local(wire)

    first = await collect(provider.stream(OPEN))
    second = await collect(provider.stream(HELLO))

    tool_body, text_body = (r.body for r in wire.received)
    assert tool_body["stream"] is False and tool_body["max_tokens"] == 8192
    # A turn without tools still streams, without asking for usage this server never sends.
    assert text_body["stream"] is True and "stream_options" not in text_body
    assert isinstance(first[-1], Completion) and not first[-1].usage.tokens_reported
    assert isinstance(second[-1], Completion) and not second[-1].usage.tokens_reported
    assert [g.path for g in wire.gets] == ["/v1/models"]  # one probe, at the first request
    caps = await provider.capabilities()
    assert (caps.kind, caps.source("kind"), caps.source("stream_tool_calls")) == (
        "llama-cpp-python",
        "detected",
        "detected",
    )


async def test_explicit_setting_wins_over_detection(wire: WireServer) -> None:
    wire.pages["/v1/models"] = model_list("me")
    wire.push(openai_sse([gpt_chunk({"content": "ok"}), gpt_chunk({}, "stop")]))
    choices = EndpointChoices(stream_tool_calls=True, max_tokens_field="max_completion_tokens")

    await collect(local(wire, endpoint=choices).stream(OPEN))

    body = wire.received[0].body
    assert body["stream"] is True and body["max_completion_tokens"] == 8192
    assert "max_tokens" not in body


async def test_no_probe_when_every_capability_is_set(wire: WireServer) -> None:
    wire.pages["/v1/models"] = model_list("vllm")
    wire.push(hello())
    choices = EndpointChoices(max_tokens_field="max_tokens", stream_tool_calls=True, usage=True)

    await collect(local(wire, endpoint=choices).stream(HELLO))

    assert wire.gets == []


@pytest.mark.parametrize(
    ("page", "path", "kind"),
    [
        (model_list("vllm"), "/v1/models", "vllm"),
        (model_list("llamacpp"), "/v1/models", "llama-server"),
        (model_list("library"), "/v1/models", "ollama"),
        (model_list("organization_owner"), "/v1/models", "lmstudio"),
        (model_list("someone", server="llama.cpp"), "/v1/models", "llama-server"),
        (json_reply(200, {"default_generation_settings": {}}), "/props", "llama-server"),
        (json_reply(200, {"version": "0.9.0"}), "/api/version", "ollama"),
    ],
)
async def test_server_kind_detected_from_its_answers(
    wire: WireServer, page: Reply, path: str, kind: str
) -> None:
    wire.pages[path] = page
    wire.push(hello())
    provider = local(wire)

    await collect(provider.stream(HELLO))

    caps = await provider.capabilities()
    assert (caps.kind, caps.max_tokens_field) == (kind, "max_tokens")
    assert wire.received[0].body["max_tokens"] == 8192


async def test_probe_failure_falls_back_to_safe_defaults(wire: WireServer) -> None:
    wire.push(hello())
    provider = local(wire)  # The server answers 404 to every GET.

    await collect(provider.stream(OPEN))

    caps = await provider.capabilities()
    assert (caps.kind, caps.source("kind"), caps.max_tokens_field) == (
        "unknown",
        "default",
        "max_tokens",
    )
    assert wire.received[0].body["stream"] is True


async def test_fingerprint_names_a_server_the_probe_could_not(wire: WireServer) -> None:
    chunks = [gpt_chunk({"content": "hi"}), gpt_chunk({}, "stop")]
    for chunk in chunks:
        chunk["system_fingerprint"] = "b5921-3f4c1d2e"
    wire.push(openai_sse(chunks))
    provider = local(wire)

    await collect(provider.stream(HELLO))

    assert (await provider.capabilities()).kind == "llama-server"


@pytest.mark.parametrize("choice", ["none", "auto", "required"])
async def test_tool_choice_is_sent_with_tools_when_set(wire: WireServer, choice: str) -> None:
    wire.push(hello(), hello())
    caps = EndpointCapabilities(tool_choice=choice)  # type: ignore[arg-type]
    provider = local(wire, capabilities=caps)

    await collect(provider.stream(OPEN))
    await collect(provider.stream(HELLO))

    with_tools, without = (r.body for r in wire.received)
    assert with_tools["tool_choice"] == choice
    assert "tool_choice" not in without  # no tools offered, nothing to choose


async def test_tool_choice_is_omitted_by_default(wire: WireServer) -> None:
    wire.push(hello())

    await collect(local(wire).stream(OPEN))

    assert "tool_choice" not in wire.received[0].body


async def test_usage_not_expected_sends_no_stream_options(wire: WireServer) -> None:
    wire.push(openai_sse([gpt_chunk({"content": "hi"}), gpt_chunk({}, "stop")]))

    parts = await collect(local(wire, endpoint=EndpointChoices(usage=False)).stream(HELLO))

    assert "stream_options" not in wire.received[0].body
    done = parts[-1]
    assert isinstance(done, Completion) and done.usage.tokens_reported is False


async def test_max_tokens_field_argument_still_chooses_the_field(wire: WireServer) -> None:
    wire.push(hello())

    await collect(local(wire, max_tokens_field="max_completion_tokens").stream(HELLO))

    assert wire.received[0].body["max_completion_tokens"] == 8192


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (json_reply(401, {"detail": "Invalid API key"}), "Invalid API key"),
        (json_reply(422, {"detail": [{"msg": "Field required"}]}), "Field required"),
        (Reply(status=500, chunks=(b"Internal Server Error",)), "Internal Server Error"),
    ],
)
async def test_the_servers_own_words_whatever_the_body(
    wire: WireServer, reply: Reply, words: str
) -> None:
    wire.push(reply)

    with pytest.raises(ProviderError) as caught:
        await collect(local(wire).stream(HELLO))

    assert str(caught.value).endswith(f"from {chat_url(wire)}: {words}")
