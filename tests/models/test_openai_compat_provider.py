"""OpenAICompatProvider with the real SDK against a loopback server speaking Chat Completions."""

from __future__ import annotations

from typing import Any

import pytest
from wire_server import (
    Reply,
    SleepRecorder,
    WireServer,
    closed_port,
    collect,
    gpt_chunk,
    gpt_tool_delta,
    gpt_usage,
    json_reply,
    openai_sse,
)

from kestrel.models.openai_compat import OpenAICompatProvider, build_params
from kestrel.models.retry import RetryPolicy, stream_with_retry
from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextTooLong,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultTurn,
    ToolSpec,
    UserTurn,
)

MODEL = "gpt-4o"
NO_JITTER = RetryPolicy(jitter=0.0)

READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
HELLO = ModelRequest(system="You are terse.", messages=(UserTurn(text="Say hello."),))


def provider(wire: WireServer, model: str = MODEL, **kwargs: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider(model, api_key="sk-test", base_url=f"{wire.url}/v1", **kwargs)


def openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def hello_reply() -> Any:
    return openai_sse(
        [
            gpt_chunk({"role": "assistant", "content": ""}),
            gpt_chunk({"content": "Hello"}),
            gpt_chunk({"content": ", world"}),
            gpt_chunk({}, finish_reason="stop"),
            gpt_usage(prompt=12, completion=4),
        ]
    )


async def test_plain_text_streams_deltas_then_completion(wire: WireServer) -> None:
    wire.push(hello_reply())

    parts = await collect(provider(wire).stream(HELLO))

    assert parts[:2] == [TextDelta(text="Hello"), TextDelta(text=", world")]
    done = parts[2]
    assert isinstance(done, Completion) and len(parts) == 3
    assert done.message == AssistantTurn(text="Hello, world")
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 4)
    sent = wire.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    # The loopback server names no known kind: the field every compatible server reads.
    assert sent.body["max_tokens"] == 8192 and "max_completion_tokens" not in sent.body
    assert wire.gets[0].path == "/v1/models"
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert "tools" not in sent.body


async def test_tool_call_arguments_split_across_chunks(wire: WireServer) -> None:
    wire.push(
        openai_sse(
            [
                gpt_chunk({"role": "assistant", "content": None}),
                gpt_chunk(gpt_tool_delta(0, "", call_id="call_abc", name="read_file")),
                gpt_chunk(gpt_tool_delta(0, '{"pa')),
                gpt_chunk(gpt_tool_delta(0, 'th": "src/')),
                gpt_chunk(gpt_tool_delta(0, 'app.py"}')),
                gpt_chunk({}, finish_reason="tool_calls"),
                gpt_usage(prompt=30, completion=9),
            ]
        )
    )
    request = ModelRequest(system="", messages=(UserTurn(text="Open app.py"),), tools=(READ,))

    parts = await collect(provider(wire).stream(request))

    assert parts[:4] == [
        ToolCallDelta(index=0, call_id="call_abc", name="read_file"),
        ToolCallDelta(index=0, arguments_delta='{"pa'),
        ToolCallDelta(index=0, arguments_delta='th": "src/'),
        ToolCallDelta(index=0, arguments_delta='app.py"}'),
    ]
    done = parts[4]
    assert isinstance(done, Completion)
    call = ToolCall(id="call_abc", name="read_file", arguments='{"path": "src/app.py"}')
    assert done.message.tool_calls == (call,)
    assert done.stop_reason == "tool_use"
    body = wire.received[0].body
    assert body["messages"] == [{"role": "user", "content": "Open app.py"}]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": READ.input_schema,
            },
        }
    ]


async def test_parallel_tool_calls_are_reassembled_by_index(wire: WireServer) -> None:
    wire.push(
        openai_sse(
            [
                gpt_chunk(gpt_tool_delta(0, "", call_id="call_1", name="read_file")),
                gpt_chunk(gpt_tool_delta(0, '{"path": ')),
                gpt_chunk(gpt_tool_delta(1, "", call_id="call_2", name="read_file")),
                gpt_chunk(gpt_tool_delta(1, '{"path": "b.py"}')),
                gpt_chunk(gpt_tool_delta(0, '"a.py"}')),
                gpt_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )

    parts = await collect(provider(wire).stream(HELLO))

    assert [(p.index, p.arguments_delta) for p in parts if isinstance(p, ToolCallDelta)] == [
        (0, ""),
        (0, '{"path": '),
        (1, ""),
        (1, '{"path": "b.py"}'),
        (0, '"a.py"}'),
    ]
    done = parts[-1]
    assert isinstance(done, Completion)
    assert done.message.tool_calls == (
        ToolCall(id="call_1", name="read_file", arguments='{"path": "a.py"}'),
        ToolCall(id="call_2", name="read_file", arguments='{"path": "b.py"}'),
    )


async def test_usage_with_cached_tokens_and_cost(wire: WireServer) -> None:
    chunks = [gpt_chunk({"content": "ok"}), gpt_chunk({}, "stop"), gpt_usage(1200, 50, cached=1000)]
    wire.push(openai_sse(chunks))

    done = (await collect(provider(wire).stream(HELLO)))[-1]

    assert isinstance(done, Completion)
    usage = done.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (200, 1000, 50)
    assert usage.cache_write_tokens == 0
    # gpt-4o: $2.50 in, $1.25 cached in, $10 out per million tokens.
    assert usage.cost_usd == pytest.approx((200 * 2.5 + 1000 * 1.25 + 50 * 10) / 1e6)
    assert usage.priced is True


async def test_local_server_without_usage_or_key(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A llama.cpp-style server: no usage chunk, a chunk with no choices, no API key needed.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chunks = [gpt_chunk({"content": "hi"}, model="qwen"), gpt_chunk({}, "stop", model="qwen")]
    empty = gpt_chunk({}, model="qwen")
    empty["choices"] = []
    wire.push(openai_sse([chunks[0], empty, chunks[1]]))
    local = OpenAICompatProvider("qwen2.5-coder:7b", base_url=f"{wire.url}/v1")

    done = (await collect(local.stream(HELLO)))[-1]

    assert isinstance(done, Completion)
    assert done.message.text == "hi"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (0, 0)
    assert (done.usage.cost_usd, done.usage.priced) == (0.0, False)
    assert wire.received[0].headers["authorization"] == "Bearer not-needed"


async def test_base_url_from_the_environment_also_needs_no_key(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{wire.url}/v1")
    wire.push(hello_reply())

    await collect(OpenAICompatProvider("llama3.1:8b").stream(HELLO))

    assert wire.received[0].headers["authorization"] == "Bearer not-needed"


async def test_missing_key_without_base_url_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(AuthenticationFailed):
        await collect(OpenAICompatProvider(MODEL).stream(HELLO))


async def test_request_carries_tool_calls_and_tool_messages(wire: WireServer) -> None:
    wire.push(hello_reply())
    history = (
        UserTurn(text="Fix it."),
        AssistantTurn(
            text="",
            tool_calls=(
                ToolCall(id="call_1", name="read_file", arguments='{"path": "a.py"}'),
                ToolCall(id="call_2", name="read_file", arguments=""),
            ),
        ),
        ToolResultTurn(call_id="call_1", name="read_file", content="print(1)"),
        ToolResultTurn(call_id="call_2", name="read_file", content="no such file", is_error=True),
        AssistantTurn(text="Both read."),
    )
    request = ModelRequest(system="sys", messages=history, tools=(READ,), temperature=0.0)

    await collect(provider(wire).stream(request))

    body = wire.received[0].body
    assert body["temperature"] == 0.0
    assert body["messages"][1:] == [
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "call_2", "content": "no such file"},
        {"role": "assistant", "content": "Both read."},
    ]


def test_max_tokens_field_for_older_servers() -> None:
    params = build_params("llama3", HELLO, max_tokens_field="max_tokens")

    assert params["max_tokens"] == 8192
    assert "max_completion_tokens" not in params


async def test_rate_limit_honours_retry_after_ms_then_succeeds(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    limited = openai_error("Rate limit reached for gpt-4o.", "requests", "rate_limit_exceeded")
    headers = {"retry-after-ms": "1500", "retry-after": "2"}
    wire.push(json_reply(429, limited, headers), hello_reply())
    retries: list[tuple[int, float, ProviderError]] = []

    parts = await collect(
        stream_with_retry(
            provider(wire),
            HELLO,
            policy=NO_JITTER,
            sleep=sleep,
            on_retry=lambda n, d, e: retries.append((n, d, e)),
        )
    )

    assert parts[0] == TextDelta(text="Hello")
    assert sleep.delays == [1.5]
    assert [(n, d, type(e)) for n, d, e in retries] == [(1, 1.5, RateLimited)]
    assert len(wire.received) == 2


async def test_service_unavailable_is_retried(wire: WireServer, sleep: SleepRecorder) -> None:
    busy = openai_error("The server is overloaded.", "server_error")
    wire.push(json_reply(503, busy), json_reply(503, busy), hello_reply())

    parts = await collect(stream_with_retry(provider(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert isinstance(parts[-1], Completion)
    assert sleep.delays == [1.0, 2.0]


@pytest.mark.parametrize(
    "body",
    [
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        # vLLM puts the error at the top level and says it only in words.
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ],
)
async def test_context_length_is_context_too_long_and_not_retried(
    wire: WireServer, sleep: SleepRecorder, body: dict[str, Any]
) -> None:
    wire.push(json_reply(400, body))

    with pytest.raises(ContextTooLong) as caught:
        await collect(stream_with_retry(provider(wire), HELLO, sleep=sleep))

    assert caught.value.status == 400 and "maximum context length" in str(caught.value)
    assert sleep.delays == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, BadRequest),
        (401, AuthenticationFailed),
        (403, AuthenticationFailed),
        (404, BadRequest),
        (422, BadRequest),
        (500, ServerError),
        (502, ServerError),
        (501, BadRequest),
        (503, Overloaded),
    ],
)
async def test_http_errors_map_to_typed_errors(
    wire: WireServer, status: int, expected: type[ProviderError]
) -> None:
    wire.push(json_reply(status, openai_error("Something went wrong.", "some_error")))

    with pytest.raises(ProviderError) as caught:
        await collect(provider(wire).stream(HELLO))

    assert type(caught.value) is expected
    assert caught.value.status == status
    assert str(caught.value).startswith(
        f"openai error {status} from {wire.url}/v1/chat/completions: Something went wrong."
    )


async def test_connection_refused_is_a_network_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    offline = OpenAICompatProvider(MODEL, api_key="k", base_url=url)

    with pytest.raises(NetworkError) as caught:
        await collect(offline.stream(HELLO))

    assert f"the connection to {url}/chat/completions failed" in str(caught.value)
    assert "Errno" not in str(caught.value)


async def test_error_object_mid_stream_is_typed(wire: WireServer) -> None:
    # OpenRouter reports upstream failures inside the 200 stream, with the status as `code`.
    upstream = {"error": {"message": "Upstream provider failed", "code": 502}}
    wire.push(openai_sse([gpt_chunk({"content": "par"}), upstream], done=False))
    seen: list[object] = []

    with pytest.raises(ServerError):
        async for part in provider(wire).stream(HELLO):
            seen.append(part)

    assert seen == [TextDelta(text="par")]


async def test_malformed_chunk_is_a_server_error(wire: WireServer) -> None:
    broken = openai_sse([gpt_chunk({"content": "ok"})])
    wire.push(Reply(headers=broken.headers, chunks=(b"data: {not json\n\n",), stream=True))

    with pytest.raises(ServerError):
        await collect(provider(wire).stream(HELLO))
