"""`kestrel acp` on the wire: bad input gets JSON-RPC errors, standard output carries only the
protocol, and signing in says which environment variables hold the keys."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from acp.connection import StreamDirection, StreamEvent
from acp.exceptions import RequestError
from acp.meta import PROTOCOL_VERSION
from acp_kit import Repo, within
from acp_schema import SchemaCheck

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}},
}
PROMPT_UNKNOWN = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "session/prompt",
    "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]},
}
BAD_LINES = [
    json.dumps(INITIALIZE),
    "{not json",
    "[1, 2]",
    json.dumps(PROMPT_UNKNOWN),
    json.dumps({"jsonrpc": "2.0", "id": 4, "method": "no/such"}),
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/new",
            "params": {"cwd": "rel", "mcpServers": []},
        }
    ),
    json.dumps({"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {}}),
    json.dumps({"id": 7, "method": "initialize"}),
    json.dumps(
        {"jsonrpc": "2.0", "id": 8, "method": "authenticate", "params": {"methodId": "environment"}}
    ),
]
"""What a confused editor might send; every request still gets its answer."""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def test_bad_input_gets_json_rpc_errors_and_stdout_only_the_protocol(repo: Repo) -> None:
    model = repo.script([{"text": "hi"}])
    agent = subprocess.Popen(
        repo.agent_command("--model", model),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=repo.root,
        env=repo.env,
        text=True,
    )
    assert agent.stdin is not None and agent.stdout is not None
    watchdog = threading.Timer(120, agent.kill)  # An agent that stops answering fails the test.
    watchdog.start()
    agent.stdin.write("\n".join(BAD_LINES) + "\n")
    agent.stdin.flush()
    replies: list[dict[str, Any]] = []
    while {1, 3, 4, 5, 6, 7, 8} - {reply.get("id") for reply in replies}:
        line = agent.stdout.readline()
        assert line, "the agent closed its output before answering every request"
        replies.append(json.loads(line))
    out, err = agent.communicate(timeout=120)  # Closes its input: the agent stops.
    watchdog.cancel()

    assert agent.returncode == 0, err
    replies += [json.loads(line) for line in out.splitlines()]
    check = SchemaCheck()
    for line in BAD_LINES[:1] + BAD_LINES[3:]:  # The lines that are JSON objects.
        check.observe(StreamEvent(StreamDirection.OUTGOING, json.loads(line)))
    for reply in replies:
        check.observe(StreamEvent(StreamDirection.INCOMING, reply))
    assert check.problems == []
    answers = {reply["id"]: reply for reply in replies if reply.get("id") is not None}
    unnamed = [reply["error"]["code"] for reply in replies if reply.get("id") is None]
    assert sorted(unnamed) == [-32700, -32600]
    assert answers[1]["result"]["agentCapabilities"]["loadSession"] is True
    assert answers[3]["error"]["code"] == -32002  # No such session.
    assert answers[4]["error"]["code"] == -32601
    assert answers[5]["error"]["code"] == -32602 and "absolute" in json.dumps(answers[5])
    assert answers[6]["error"]["code"] == -32602
    assert answers[7]["error"]["code"] == -32600
    assert answers[8]["result"] == {}
    assert "Traceback" not in err


def test_a_bad_model_is_refused_before_the_protocol_starts(repo: Repo) -> None:
    done = subprocess.run(
        repo.agent_command("--model", "nosuch:thing"),
        input="",
        capture_output=True,
        cwd=repo.root,
        env=repo.env,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "--model" in done.stderr and "nosuch:thing" in done.stderr


async def test_signing_in_names_the_environment_variables(repo: Repo) -> None:
    async with repo.editor("--model", "anthropic:claude-sonnet-4-5") as editor:
        (method,) = editor.initialized.auth_methods
        with pytest.raises(RequestError) as no_key:
            await within(editor.agent.authenticate(method_id=method.id))
        with pytest.raises(RequestError) as no_session:
            await within(editor.agent.new_session(cwd=str(repo.root)))
    assert "ANTHROPIC_API_KEY" in (method.description or "")
    assert no_key.value.code == no_session.value.code == -32000
    assert "ANTHROPIC_API_KEY is not set" in json.dumps(no_key.value.data)

    repo.env["ANTHROPIC_API_KEY"] = "sk-test-not-used"
    async with repo.editor("--model", "anthropic:claude-sonnet-4-5") as editor:
        signed_in = await within(editor.agent.authenticate(method_id=method.id))
        new = await within(editor.agent.new_session(cwd=str(repo.root)))
    assert signed_in is not None and new.session_id
