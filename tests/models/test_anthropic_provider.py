"""AnthropicProvider with the real SDK against a loopback server speaking the Messages API."""

from __future__ import annotations

from typing import Any

import pytest
from wire_server import (
    SleepRecorder,
    WireServer,
    anthropic_sse,
    claude_end,
    claude_error,
    claude_start,
    claude_text,
    claude_tool,
    closed_port,
    collect,
    json_reply,
)

from kestrel.models.anthropic import AnthropicProvider, build_params
from kestrel.models.pricing import ModelPrice
from kestrel.models.retry import RetryPolicy, stream_with_retry
from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextTooLong,
    EmptyReply,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    StreamCut,
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

MODEL = "claude-sonnet-4-6"
NO_JITTER = RetryPolicy(jitter=0.0)

READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
GREP = ToolSpec(
    name="grep",
    description="Search files.",
    input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
)
HELLO = ModelRequest(system="You are terse.", messages=(UserTurn(text="Say hello."),))


def provider(wire: WireServer, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(MODEL, api_key="test-key", base_url=wire.url, **kwargs)


def count_cache_marks(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") == {"type": "ephemeral"} else 0
        return own + sum(count_cache_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_cache_marks(v) for v in value)
    return 0


async def test_plain_text_streams_deltas_then_completion(wire: WireServer) -> None:
    events = [claude_start(MODEL), {"type": "ping"}, *claude_text(0, "Hello", ", world")]
    wire.push(anthropic_sse([*events, *claude_end("end_turn", 4)]))

    parts = await collect(provider(wire).stream(HELLO))

    assert parts[:2] == [TextDelta(text="Hello"), TextDelta(text=", world")]
    done = parts[2]
    assert isinstance(done, Completion) and len(parts) == 3
    assert done.message == AssistantTurn(text="Hello, world")
    assert done.stop_reason == "end_turn"
    assert done.usage.model == MODEL
    assert (done.usage.input_tokens, done.usage.output_tokens) == (10, 4)
    sent = wire.received[0]
    assert sent.path == "/v1/messages"
    assert sent.body["model"] == MODEL and sent.body["stream"] is True
    assert sent.body["max_tokens"] == 8192
    assert sent.body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert sent.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Say hello.", "cache_control": {"type": "ephemeral"}}
            ],
        }
    ]
    assert "tools" not in sent.body


async def test_tool_call_arguments_split_across_chunks(wire: WireServer) -> None:
    pieces = ('{"pa', 'th": "src/', 'app.py"}')
    events = [claude_start(MODEL), *claude_tool(0, "toolu_01A", "read_file", *pieces)]
    wire.push(anthropic_sse([*events, *claude_end("tool_use")]))

    request = ModelRequest(system="", messages=(UserTurn(text="Open app.py"),), tools=(READ,))
    parts = await collect(provider(wire).stream(request))

    assert parts[:4] == [
        ToolCallDelta(index=0, call_id="toolu_01A", name="read_file"),
        ToolCallDelta(index=0, arguments_delta='{"pa'),
        ToolCallDelta(index=0, arguments_delta='th": "src/'),
        ToolCallDelta(index=0, arguments_delta='app.py"}'),
    ]
    done = parts[4]
    assert isinstance(done, Completion)
    call = ToolCall(id="toolu_01A", name="read_file", arguments='{"path": "src/app.py"}')
    assert done.message.tool_calls == (call,)
    assert done.stop_reason == "tool_use"
    assert "system" not in wire.received[0].body


async def test_parallel_tool_calls_after_text(wire: WireServer) -> None:
    events = [
        claude_start(MODEL),
        *claude_text(0, "Reading both."),
        *claude_tool(1, "toolu_1", "read_file", '{"path": ', '"a.py"}'),
        *claude_tool(2, "toolu_2", "grep", '{"pattern"', ': "TODO"}'),
        *claude_end("tool_use"),
    ]
    wire.push(anthropic_sse(events))

    request = ModelRequest(system="s", messages=(UserTurn(text="go"),), tools=(READ, GREP))
    parts = await collect(provider(wire).stream(request))

    starts = [p for p in parts if isinstance(p, ToolCallDelta) and p.call_id]
    assert [(p.index, p.call_id, p.name) for p in starts] == [
        (0, "toolu_1", "read_file"),
        (1, "toolu_2", "grep"),
    ]
    done = parts[-1]
    assert isinstance(done, Completion)
    assert done.message.text == "Reading both."
    assert done.message.tool_calls == (
        ToolCall(id="toolu_1", name="read_file", arguments='{"path": "a.py"}'),
        ToolCall(id="toolu_2", name="grep", arguments='{"pattern": "TODO"}'),
    )


async def test_usage_cache_fields_and_cost(wire: WireServer) -> None:
    start = claude_start(MODEL, input_tokens=100, cache_write=2000, cache_read=5000)
    wire.push(anthropic_sse([start, *claude_text(0, "ok"), *claude_end("end_turn", 50)]))

    done = (await collect(provider(wire).stream(HELLO)))[-1]

    assert isinstance(done, Completion)
    usage = done.usage
    assert (usage.input_tokens, usage.output_tokens) == (100, 50)
    assert (usage.cache_write_tokens, usage.cache_read_tokens) == (2000, 5000)
    # Sonnet 4.x: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million tokens.
    assert usage.cost_usd == pytest.approx((100 * 3 + 50 * 15 + 2000 * 3.75 + 5000 * 0.3) / 1e6)
    assert usage.priced is True
    assert usage.latency_ms > 0


async def test_pricing_override_prices_a_private_model(wire: WireServer) -> None:
    wire.push(anthropic_sse([claude_start("internal"), *claude_text(0, "ok"), *claude_end()]))
    custom = AnthropicProvider(
        "internal-model",
        api_key="k",
        base_url=wire.url,
        pricing={"internal-*": ModelPrice(1.0, 2.0, 0.0, 0.0)},
    )

    done = (await collect(custom.stream(HELLO)))[-1]

    assert isinstance(done, Completion)
    assert done.usage.cost_usd == pytest.approx((10 * 1.0 + 5 * 2.0) / 1e6)


async def test_request_groups_tool_results_and_marks_the_stable_prefix(wire: WireServer) -> None:
    wire.push(anthropic_sse([claude_start(MODEL), *claude_text(0, "done"), *claude_end()]))
    history = (
        UserTurn(text="Fix the bug."),
        AssistantTurn(
            text="Looking.",
            tool_calls=(
                ToolCall(id="toolu_1", name="read_file", arguments='{"path": "a.py"}'),
                ToolCall(id="toolu_2", name="grep", arguments="{not json"),
            ),
        ),
        ToolResultTurn(call_id="toolu_1", name="read_file", content="print(1)"),
        ToolResultTurn(call_id="toolu_2", name="grep", content="bad regex", is_error=True),
    )
    request = ModelRequest(system="Be careful.", messages=history, tools=(READ, GREP))

    await collect(provider(wire).stream(request))

    body = wire.received[0].body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert assistant[1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_file",
        "input": {"path": "a.py"},
    }
    assert assistant[2]["input"] == {"raw_arguments": "{not json"}
    assert results == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": "bad regex",
            "is_error": True,
            "cache_control": {"type": "ephemeral"},
        },
    ]
    assert body["tools"][0] == {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": READ.input_schema,
    }
    # Breakpoints: last tool, system, and the last block of the two newest turns.
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert assistant[2]["cache_control"] == {"type": "ephemeral"}
    assert results[-1]["cache_control"] == {"type": "ephemeral"}
    assert count_cache_marks(body) == 4


def test_tool_results_then_user_text_share_one_user_message() -> None:
    request = ModelRequest(
        system="",
        messages=(
            UserTurn(text="go"),
            AssistantTurn(tool_calls=(ToolCall(id="t1", name="read_file", arguments=""),)),
            ToolResultTurn(call_id="t1", name="read_file", content="x"),
            UserTurn(text="and also this"),
        ),
        temperature=0.2,
    )

    params = build_params(MODEL, request)

    last = params["messages"][-1]
    assert last["role"] == "user"
    assert [block["type"] for block in last["content"]] == ["tool_result", "text"]
    assert params["messages"][1]["content"][0]["input"] == {}
    assert params["extra_body"] == {"temperature": 0.2}
    assert count_cache_marks(params) == 2


def test_a_single_turn_is_marked_as_the_newest() -> None:
    params = build_params(MODEL, HELLO)
    assert count_cache_marks(params) == 2
    assert params["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_rate_limit_honours_retry_after_then_succeeds(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    limited = claude_error("rate_limit_error", "Number of request tokens has exceeded your limit.")
    wire.push(
        json_reply(429, limited, {"retry-after": "7"}),
        anthropic_sse([claude_start(MODEL), *claude_text(0, "hi"), *claude_end()]),
    )
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

    assert parts[0] == TextDelta(text="hi")
    assert sleep.delays == [7.0]
    assert len(retries) == 1
    attempt, delay, error = retries[0]
    assert (attempt, delay) == (1, 7.0)
    assert isinstance(error, RateLimited) and error.retry_after == 7.0 and error.status == 429
    assert len(wire.received) == 2


async def test_overloaded_529_is_retried_with_backoff(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    wire.push(
        json_reply(529, claude_error("overloaded_error", "Overloaded")),
        anthropic_sse([claude_start(MODEL), *claude_text(0, "hi"), *claude_end()]),
    )

    parts = await collect(stream_with_retry(provider(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert isinstance(parts[-1], Completion)
    assert sleep.delays == [1.0]


async def test_context_too_long_is_not_retried(wire: WireServer, sleep: SleepRecorder) -> None:
    too_long = claude_error("invalid_request_error", "prompt is too long: 215000 tokens > 200000")
    wire.push(json_reply(400, too_long))

    with pytest.raises(ContextTooLong) as caught:
        await collect(stream_with_retry(provider(wire), HELLO, sleep=sleep))

    assert caught.value.status == 400 and caught.value.provider == "anthropic"
    assert sleep.delays == []
    assert len(wire.received) == 1


@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [
        (401, "authentication_error", AuthenticationFailed),
        (403, "permission_error", AuthenticationFailed),
        (400, "invalid_request_error", BadRequest),
        (404, "not_found_error", BadRequest),
        (413, "request_too_large", BadRequest),
        (500, "api_error", ServerError),
        (503, "api_error", Overloaded),
        (529, "overloaded_error", Overloaded),
    ],
)
async def test_http_errors_map_to_typed_errors(
    wire: WireServer, status: int, kind: str, expected: type[ProviderError]
) -> None:
    wire.push(json_reply(status, claude_error(kind, "something went wrong")))

    with pytest.raises(ProviderError) as caught:
        await collect(provider(wire).stream(HELLO))

    assert type(caught.value) is expected
    assert caught.value.status == status


async def test_connection_refused_is_a_network_error() -> None:
    offline = AnthropicProvider(MODEL, api_key="k", base_url=f"http://127.0.0.1:{closed_port()}")

    with pytest.raises(NetworkError):
        await collect(offline.stream(HELLO))


async def test_error_event_before_any_delta_is_retried(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    wire.push(
        anthropic_sse([claude_start(MODEL), claude_error("overloaded_error", "Overloaded")]),
        anthropic_sse([claude_start(MODEL), *claude_text(0, "hi"), *claude_end()]),
    )

    parts = await collect(stream_with_retry(provider(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert parts[0] == TextDelta(text="hi")
    assert sleep.delays == [1.0]


async def test_error_event_after_a_delta_propagates_without_replay(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    events = [claude_start(MODEL), *claude_text(0, "Hel")[:2]]
    wire.push(anthropic_sse([*events, claude_error("overloaded_error", "Overloaded")]))
    seen: list[object] = []

    with pytest.raises(Overloaded):
        async for part in stream_with_retry(provider(wire), HELLO, sleep=sleep):
            seen.append(part)

    assert seen == [TextDelta(text="Hel")]
    assert sleep.delays == []
    assert len(wire.received) == 1


async def test_dropped_connection_mid_stream_is_a_network_error(wire: WireServer) -> None:
    wire.push(anthropic_sse([claude_start(MODEL), *claude_text(0, "Hel")[:2]], drop=True))

    with pytest.raises(NetworkError):
        await collect(provider(wire).stream(HELLO))


async def test_stream_without_message_stop_is_a_stream_cut(wire: WireServer) -> None:
    wire.push(anthropic_sse([claude_start(MODEL), *claude_text(0, "Hel")]))

    with pytest.raises(StreamCut) as caught:
        await collect(provider(wire).stream(HELLO))

    message = str(caught.value)
    assert "the stream was cut mid-reply" in message and "no message_stop" in message
    assert f"{wire.url}/v1/messages" in message


async def test_empty_stream_is_retried_once_then_a_stream_cut(
    wire: WireServer, sleep: SleepRecorder
) -> None:
    empty = anthropic_sse([])
    wire.push(empty, empty, empty)

    with pytest.raises(StreamCut) as caught:
        await collect(stream_with_retry(provider(wire), HELLO, policy=NO_JITTER, sleep=sleep))

    assert "mid-reply" not in str(caught.value)
    assert len(wire.received) == 2 and sleep.delays == [1.0]


async def test_finished_reply_with_no_content_is_an_empty_reply(wire: WireServer) -> None:
    wire.push(anthropic_sse([claude_start(MODEL), *claude_end()]))

    with pytest.raises(EmptyReply) as caught:
        await collect(provider(wire).stream(HELLO))

    assert 'stop reason "end_turn"' in str(caught.value)


async def test_missing_credentials_fail_before_any_request(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_IDENTITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    keyless = AnthropicProvider(MODEL, base_url=wire.url)

    with pytest.raises(AuthenticationFailed):
        await collect(keyless.stream(HELLO))

    assert wire.received == []


async def test_api_key_from_the_environment(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    wire.push(anthropic_sse([claude_start(MODEL), *claude_text(0, "hi"), *claude_end()]))

    await collect(AnthropicProvider(MODEL, base_url=wire.url).stream(HELLO))

    sent = wire.received[0].headers
    assert sent.get("x-api-key") == "env-key" or sent.get("authorization") == "Bearer env-key"


async def test_closed_provider_opens_a_new_client_when_used_again(wire: WireServer) -> None:
    reply = [claude_start(MODEL), *claude_text(0, "hi"), *claude_end()]
    wire.push(anthropic_sse(reply), anthropic_sse(reply))
    claude = provider(wire)

    await collect(claude.stream(HELLO))
    await claude.aclose()
    parts = await collect(claude.stream(HELLO))

    assert parts[0] == TextDelta(text="hi")
    assert len(wire.received) == 2
