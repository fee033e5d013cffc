"""The OpenAI-compatible provider against replies recorded from real local servers.

Each fixture under tests/fixtures/wire/<server>/ is one exchange recorded through
bench/providers/wire_record.py; `ReplayServer` sends it back byte for byte and the real
`OpenAICompatProvider` must turn it into the right completion or typed error. What a test expects
is read from the recorded bytes themselves (the text, the tool call, the usage, the server's error
message), so a re-recorded fixture keeps the tests honest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from wire_replay import WIRE, Fixture, ReplayServer, load, servers

from kestrel.models.endpoint import EndpointCapabilities
from kestrel.models.openai_compat import OpenAICompatProvider, build_params
from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextTooLong,
    EmptyReply,
    Overloaded,
    ProviderError,
    ServerError,
    StreamCut,
)
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultTurn,
    ToolSpec,
    UserTurn,
)

MODEL = "gemma-3-270m"
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
TEXT = ModelRequest(system="", messages=(UserTurn(text="Say hello in five words."),))
TOOLS = ModelRequest(
    system="", messages=(UserTurn(text="What is the weather in Paris?"),), tools=(WEATHER,)
)
STREAMED = EndpointCapabilities(max_tokens_field="max_tokens", stream_tool_calls=True)
WHOLE = EndpointCapabilities(max_tokens_field="max_tokens", stream_tool_calls=False)
SERVERS = servers()
STOPS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _all(keep: Callable[[Fixture], bool]) -> list[Any]:
    """pytest params for every recorded fixture that `keep` selects, named server/fixture."""
    found = []
    for server in SERVERS:
        for path in sorted((WIRE / server).glob("*.json")):
            recorded = load(path)
            if keep(recorded):
                found.append(pytest.param(recorded, id=f"{server}/{recorded.name}"))
    return found


def _usage_frame(recorded: Fixture) -> dict[str, Any] | None:
    frames = recorded.sse_data() if recorded.framing == "chunked" else [recorded.json_body()]
    reported = [frame["usage"] for frame in frames if frame.get("usage")]
    return reported[-1] if reported else None


def _streamed_text(recorded: Fixture) -> str:
    return "".join(
        choice["delta"].get("content") or ""
        for frame in recorded.sse_data()
        for choice in frame.get("choices") or ()
    )


def _finish(recorded: Fixture) -> str | None:
    reasons = [
        choice.get("finish_reason")
        for frame in recorded.sse_data()
        for choice in frame.get("choices") or ()
    ]
    finished = [reason for reason in reasons if reason]
    return finished[-1] if finished else None


def _recorded_call(recorded: Fixture) -> tuple[str, str]:
    """The first tool call's name and its whole arguments text, as the server sent them."""
    if recorded.status != 200:
        return "", ""
    if recorded.framing != "chunked":
        calls = recorded.json_body()["choices"][0]["message"].get("tool_calls") or ()
        return (
            (calls[0]["function"]["name"], calls[0]["function"]["arguments"]) if calls else ("", "")
        )
    name, arguments = "", ""
    for frame in recorded.sse_data():
        for choice in frame.get("choices") or ():
            for call in choice["delta"].get("tool_calls") or ():
                name = name or call["function"].get("name") or ""
                arguments += call["function"].get("arguments") or ""
    return name, arguments


def _server_message(recorded: Fixture) -> str:
    """The server's own words in an error body, whatever its shape."""
    try:
        body = recorded.json_body()
    except ValueError:
        return recorded.body.decode("utf-8").strip()
    error = body.get("error", body)
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(body.get("detail", body))


async def _replay(
    recorded: Fixture, request: ModelRequest, caps: EndpointCapabilities = STREAMED
) -> tuple[list[StreamPart], ReplayServer]:
    """Every part the provider yields for `request` against the replayed fixture."""
    server = ReplayServer(recorded)
    server.start()
    provider = OpenAICompatProvider(MODEL, base_url=server.base_url, capabilities=caps)
    parts: list[StreamPart] = []
    try:
        async for part in provider.stream(request):
            parts.append(part)
    finally:
        await provider.aclose()
        server.stop()
    return parts, server


def _completion(parts: list[StreamPart]) -> Completion:
    assert isinstance(parts[-1], Completion)
    return parts[-1]


def _is_text_stream(f: Fixture) -> bool:
    return (
        f.status == 200
        and f.framing == "chunked"
        and _finish(f) is not None
        and _streamed_text(f).strip() != ""
        and _recorded_call(f)[0] == ""
    )


def _check_usage(done: Completion, recorded: Fixture) -> None:
    usage = _usage_frame(recorded)
    if usage is None:
        assert done.usage.tokens_reported is False
        assert (done.usage.input_tokens, done.usage.output_tokens) == (0, 0)
        return
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    assert done.usage.tokens_reported is True
    assert done.usage.input_tokens == usage["prompt_tokens"] - cached
    assert done.usage.cache_read_tokens == cached
    assert done.usage.output_tokens == usage["completion_tokens"]


@pytest.mark.parametrize("recorded", _all(_is_text_stream))
async def test_a_streamed_reply_keeps_the_text_the_stop_and_the_usage_as_recorded(
    recorded: Fixture,
) -> None:
    parts, replay = await _replay(recorded, TEXT)
    done = _completion(parts)
    assert done.message.text == _streamed_text(recorded)
    assert "".join(p.text for p in parts if isinstance(p, TextDelta)) == done.message.text
    assert done.stop_reason == STOPS[_finish(recorded) or ""]
    _check_usage(done, recorded)
    [seen] = replay.seen
    assert (seen.method, seen.path) == (recorded.method, recorded.path)
    assert json.loads(seen.body)["stream"] is True


@pytest.mark.parametrize("recorded", _all(lambda f: _is_text_stream(f) and _usage_frame(f) is None))
async def test_a_stream_without_usage_is_marked_unreported(recorded: Fixture) -> None:
    done = _completion((await _replay(recorded, TEXT))[0])
    assert done.usage.tokens_reported is False
    assert (done.usage.input_tokens, done.usage.output_tokens) == (0, 0)


@pytest.mark.parametrize(
    "recorded", _all(lambda f: f.framing == "chunked" and _recorded_call(f)[0] != "")
)
async def test_a_streamed_tool_call_becomes_one_tool_call(recorded: Fixture) -> None:
    name, arguments = _recorded_call(recorded)
    parts, _ = await _replay(recorded, TOOLS, STREAMED)
    done = _completion(parts)
    [call] = done.message.tool_calls
    assert call.name == name == "get_weather"
    assert json.loads(call.arguments) == json.loads(arguments)
    assert done.stop_reason == "tool_use"
    assert any(isinstance(p, ToolCallDelta) and p.name == name for p in parts)


@pytest.mark.parametrize(
    "recorded", _all(lambda f: f.framing == "length" and _recorded_call(f)[0] != "")
)
async def test_a_tool_call_asked_for_whole_becomes_the_same_parts(recorded: Fixture) -> None:
    name, arguments = _recorded_call(recorded)
    parts, replay = await _replay(recorded, TOOLS, WHOLE)
    done = _completion(parts)
    [call] = done.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == (name, json.loads(arguments))
    assert done.stop_reason == "tool_use"
    assert any(isinstance(p, ToolCallDelta) for p in parts)
    _check_usage(done, recorded)
    assert json.loads(replay.seen[0].body)["stream"] is False


@pytest.mark.parametrize(
    "recorded",
    _all(lambda f: f.status == 200 and f.framing == "length" and _recorded_call(f)[0] == ""),
)
async def test_a_text_reply_asked_for_whole_keeps_its_text_and_usage(recorded: Fixture) -> None:
    [choice] = recorded.json_body()["choices"]
    parts, _ = await _replay(recorded, TOOLS, WHOLE)
    done = _completion(parts)
    assert done.message.text == choice["message"]["content"] != ""
    assert done.stop_reason == STOPS[choice["finish_reason"]]
    assert "".join(p.text for p in parts if isinstance(p, TextDelta)) == done.message.text
    _check_usage(done, recorded)


@pytest.mark.parametrize(
    "recorded", _all(lambda f: f.status == 200 and f.framing == "chunked" and _finish(f) is None)
)
async def test_a_200_stream_that_never_finishes_is_a_stream_cut(recorded: Fixture) -> None:
    with pytest.raises(StreamCut) as caught:
        await _replay(recorded, TEXT)
    assert "finish" in str(caught.value)


@pytest.mark.parametrize(
    "recorded",
    _all(
        lambda f: (
            f.status == 200
            and f.framing == "chunked"
            and _finish(f) is not None
            and _streamed_text(f).strip() == ""
            and _recorded_call(f)[0] == ""
        )
    ),
)
async def test_a_finished_stream_with_nothing_in_it_is_an_empty_reply(recorded: Fixture) -> None:
    with pytest.raises(EmptyReply):
        await _replay(recorded, TOOLS, STREAMED)


def _expected_error(recorded: Fixture) -> type[ProviderError]:
    if recorded.name.startswith("overflow"):
        return ContextTooLong
    if recorded.status in (401, 403):
        return AuthenticationFailed
    if recorded.status == 503:
        return Overloaded
    if recorded.status >= 500 and recorded.status != 501:
        return ServerError
    return BadRequest


@pytest.mark.parametrize("recorded", _all(lambda f: f.status >= 400))
async def test_each_recorded_error_status_is_its_typed_error_with_the_servers_words(
    recorded: Fixture,
) -> None:
    with pytest.raises(ProviderError) as caught:
        await _replay(recorded, TEXT)
    error = caught.value
    assert type(error) is _expected_error(recorded)
    assert error.status == recorded.status
    assert _server_message(recorded) in str(error)


def test_the_recordings_cover_every_case_the_provider_must_handle() -> None:
    """Re-recording must not silently lose a case: each is recorded from some real server."""
    every = [param.values[0] for param in _all(lambda f: True)]
    finished = [f for f in every if _is_text_stream(f)]
    assert any(f.name == "stream_text" and _finish(f) == "stop" for f in finished)
    assert any(_usage_frame(f) is None for f in finished)
    assert any(_usage_frame(f) is not None for f in finished)
    assert any(f.framing == "chunked" and _recorded_call(f)[0] for f in every)
    assert any(f.framing == "length" and _recorded_call(f)[0] for f in every)
    assert any(f.status == 200 and f.framing == "chunked" and not f.chunks for f in every)
    statuses = {f.status for f in every}
    assert {400, 401, 403, 404, 500, 501, 503} <= statuses


def test_the_tool_turn_kestrel_sends_is_one_llama_cpp_python_accepts() -> None:
    recorded = load(WIRE / "llama-cpp-python" / "tool_result_turn.json")
    assert recorded.status == 500
    assert "ChatCompletionRequestAssistantMessage', 'content')" in _server_message(recorded)
    history = recorded.request_body["messages"]
    request = ModelRequest(
        system="",
        messages=(
            UserTurn(text=history[0]["content"]),
            AssistantTurn(
                text="",
                tool_calls=(
                    ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
                ),
            ),
            ToolResultTurn(call_id="call_1", name="get_weather", content=history[2]["content"]),
        ),
        tools=(WEATHER,),
    )
    [_, assistant, _] = build_params(MODEL, request, capabilities=WHOLE, stream=False)["messages"]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert isinstance(assistant["content"], str)
