"""The real `kestrel -p` against a loopback server whose reply is broken: an error, never `done`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wire_server import Reply, WireServer, gpt_chunk, model_list, openai_sse


def empty_stream() -> Reply:
    """llama.cpp on a context overflow: HTTP 200, an event stream, and not one event."""
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=(), stream=True)


def empty_reply() -> Reply:
    return openai_sse([gpt_chunk({"role": "assistant", "content": ""}), gpt_chunk({}, "stop")])


def kestrel(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("KESTREL_", "OPENAI_"))},
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_SANDBOX": "none",
    }
    args = ["-p", "say hello", "--model", "openai:local-model", "--base-url", f"{url}/v1"]
    return subprocess.run(
        [sys.executable, "-m", "kestrel", *args, *extra],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("reply", "kind", "reason"),
    [
        (empty_stream, "StreamCut", "no finish reason"),
        (empty_reply, "EmptyReply", "neither text nor a tool call"),
    ],
)
def test_broken_reply_exits_1_with_one_line_reason(
    wire: WireServer, tmp_path: Path, reply: object, kind: str, reason: str
) -> None:
    wire.push(*(reply() for _ in range(4)))  # type: ignore[operator]

    done = kestrel(tmp_path, wire.url)

    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    (line,) = [line for line in lines if kind in line]
    assert reason in line and f"{wire.url}/v1/chat/completions" in line
    assert "Traceback" not in done.stderr
    assert len(wire.received) == 2  # the first try and exactly one retry


def test_broken_stream_never_records_a_finished_turn(wire: WireServer, tmp_path: Path) -> None:
    wire.push(empty_stream(), empty_stream())

    done = kestrel(tmp_path, wire.url, "--output-format", "stream-json")

    assert done.returncode == 1
    events = [json.loads(line)["event"] for line in done.stdout.splitlines() if line.strip()]
    types = [event["type"] for event in events]
    assert "model_completed" not in types
    assert "error" in types and "model_retrying" in types
    finished = events[-1]
    assert finished["type"] == "session_finished" and finished["reason"] == "error"


def test_max_tokens_field_flag_reaches_the_request(wire: WireServer, tmp_path: Path) -> None:
    wire.pages["/v1/models"] = model_list("vllm")  # detection alone would pick max_tokens
    wire.push(openai_sse([gpt_chunk({"content": "Hello."}), gpt_chunk({}, "stop")]))

    done = kestrel(tmp_path, wire.url, "--max-tokens-field", "max_completion_tokens")

    assert done.returncode == 0, done.stderr
    body = wire.received[0].body
    assert "max_completion_tokens" in body and "max_tokens" not in body
