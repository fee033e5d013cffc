"""`kestrel mcp serve` as an MCP client sees it: the SDK's own client, over a real stdio pipe,
to a real server process working on a small git repository."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import CALC, Repo, text_of
from mcp_types.version import LATEST_HANDSHAKE_VERSION

RAW_MESSAGES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "map"}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}},
    {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "apply_edit", "arguments": {"path": "/etc/passwd"}},
    },
]
"""Messages a client sends over the pipe by hand (a malformed line goes after the first)."""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


async def test_tools_are_listed_with_descriptions_and_schemas(repo: Repo) -> None:
    async with repo.connected() as client:
        listed = await client.list_tools()

    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools) == ["search", "map", "apply_edit", "run_task"]
    assert all(tool.description and len(tool.description) > 80 for tool in tools.values())
    search = tools["search"].input_schema
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    assert set(search["properties"]) == {"query", "limit"}
    edit = tools["apply_edit"].input_schema
    assert edit["required"] == ["path", "old_str", "new_str"]
    run = tools["run_task"]
    assert run.input_schema["required"] == ["task"]
    assert "denied" in (run.description or "") and "up to default" in (run.description or "")
    assert tools["search"].annotations and tools["search"].annotations.read_only_hint


async def test_search_and_map_answer_from_the_context_engine(repo: Repo) -> None:
    async with repo.connected() as client:
        found = await client.call_tool("search", {"query": "shipping fee per kilogram"})
        mapped = await client.call_tool("map", {"budget": 500, "focus": ["calc.py"]})
        escaped = await client.call_tool("map", {"focus": ["../outside.py"]})

    assert not found.is_error
    text = text_of(found)
    first = text.split("\n\n")[1]
    assert first.startswith("1. shipping.py")
    assert "shipping.py:4-7  function  compute_shipping_fee" in first
    assert "     4\tdef compute_shipping_fee(weight_kg, distance_km):" in first
    assert not mapped.is_error
    shown = text_of(mapped)
    assert "calc.py" in shown and "def add(a, b)" in shown and "source files shown" in shown
    assert escaped.is_error and "outside the workspace" in text_of(escaped)


async def test_bad_arguments_are_error_results_that_say_what_to_fix(repo: Repo) -> None:
    async with repo.connected() as client:
        missing = await client.call_tool("search", {"limit": 3})
        wrong = await client.call_tool("search", {"query": "x", "limit": 0, "colour": "red"})
        unknown = await client.call_tool("deploy", {})
        alive = await client.call_tool("search", {"query": "add"})

    assert missing.is_error
    assert text_of(missing) == "invalid arguments for search:\n- query: missing (required)"
    assert wrong.is_error
    assert "- limit: Input should be greater than or equal to 1 (got 0)" in text_of(wrong)
    assert "- colour: unknown argument" in text_of(wrong)
    assert unknown.is_error
    assert text_of(unknown) == (
        "unknown tool 'deploy'; available tools: search, map, apply_edit, run_task"
    )
    assert not alive.is_error  # The server still answers after every mistake.
    assert "Traceback" not in repo.stderr.read_text()


async def test_apply_edit_changes_exactly_that_text_and_refuses_the_rest(
    repo: Repo, tmp_path: Path
) -> None:
    (tmp_path / "secret.py").write_text("x = 1\n")
    (repo.root / "link.py").symlink_to(tmp_path / "secret.py")
    edit = {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}
    async with repo.connected() as client:
        done = await client.call_tool("apply_edit", edit)
        again = await client.call_tool("apply_edit", edit)
        twice = await client.call_tool(
            "apply_edit", {"path": "calc.py", "old_str": "add(", "new_str": "plus("}
        )
        refused = {
            raw: await client.call_tool("apply_edit", {**edit, "path": raw})
            for raw in ("../secret.py", str(tmp_path / "secret.py"), "link.py", ".git/HEAD")
        }

    assert not done.is_error
    assert text_of(done).startswith("Edited calc.py: replaced 1 occurrence (line 2).")
    assert "-    return a - b\n+    return a + b" in text_of(done)
    assert (repo.root / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert again.is_error and text_of(again).startswith("old_str was not found in calc.py.")
    assert twice.is_error
    assert text_of(twice).startswith("old_str occurs 2 times in calc.py (at lines 1, 6)")
    for raw in ("../secret.py", str(tmp_path / "secret.py")):
        assert refused[raw].is_error and "is outside the workspace" in text_of(refused[raw])
    assert "leads through a symlink" in text_of(refused["link.py"])
    assert "is inside .git" in text_of(refused[".git/HEAD"])
    assert (tmp_path / "secret.py").read_text() == "x = 1\n"


async def test_read_only_offers_no_apply_edit(repo: Repo) -> None:
    async with repo.connected("--read-only") as client:
        listed = await client.list_tools()
        tried = await client.call_tool(
            "apply_edit", {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}
        )
        wider = await client.call_tool(
            "run_task", {"task": "fix add", "permission_mode": "accept-edits"}
        )

    assert [tool.name for tool in listed.tools] == ["search", "map", "run_task"]
    assert tried.is_error and "--read-only" in text_of(tried)
    assert wider.is_error
    assert text_of(wider).startswith(
        "permission_mode accept-edits is wider than this server allows (plan)"
    )
    assert (repo.root / "calc.py").read_text() == CALC


async def test_run_task_runs_a_session_to_its_end_and_returns_its_diff(repo: Repo) -> None:
    options = ("--permission-mode", "accept-edits", "--model", f"scripted:{repo.script}")
    async with repo.connected(*options) as client:
        bypass = await client.call_tool("run_task", {"task": "x", "permission_mode": "bypass"})
        ran = await client.call_tool("run_task", {"task": "make add add"})

    assert bypass.is_error and "wider than this server allows (accept-edits)" in text_of(bypass)
    assert not ran.is_error, text_of(ran)
    text = text_of(ran)
    summary, _, rest = text.partition("\n\nFinal answer:\n")
    assert "finished: done; exit code 0." in summary
    assert "Permission mode: accept-edits. Spent: $0.0000 over 2 turns, 1 tool call" in summary
    assert "Change: applied to the checkout." in summary
    final, _, diff = rest.partition("\n\nDiff:\n")
    assert final == "Fixed: add now adds."
    assert "--- a/calc.py\n+++ b/calc.py" in diff
    assert "-    return a - b\n+    return a + b" in diff
    assert (repo.root / "calc.py").read_text() == CALC.replace("a - b", "a + b")


def test_standard_output_carries_only_the_protocol(repo: Repo) -> None:
    """Raw JSON-RPC over the pipe: every line the server writes is a protocol message, even
    after malformed input, a bad call and an unknown tool."""
    lines = [json.dumps(RAW_MESSAGES[0]), "{not json", *map(json.dumps, RAW_MESSAGES[1:])]
    server = subprocess.Popen(
        repo.server_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=repo.root,
        env=repo.env,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    watchdog = threading.Timer(60, server.kill)  # A server that stops answering fails the test.
    watchdog.start()
    server.stdin.write("\n".join(lines) + "\n")
    server.stdin.flush()
    replies: list[dict[str, Any]] = []
    while {1, 2, 3, 4} - {reply.get("id") for reply in replies}:
        line = server.stdout.readline()
        assert line, "the server closed its output before answering every request"
        replies.append(json.loads(line))
    out, err = server.communicate(timeout=60)  # Closes its input: the server stops.
    watchdog.cancel()

    assert server.returncode == 0, err
    replies += [json.loads(line) for line in out.splitlines()]
    assert all(reply["jsonrpc"] == "2.0" for reply in replies)
    answers = {reply["id"]: reply for reply in replies if "id" in reply}
    assert answers[1]["result"]["serverInfo"]["name"] == "kestrel"
    assert answers[2]["result"]["isError"] is False
    assert answers[3]["result"]["isError"] is True
    assert answers[4]["result"]["isError"] is True
    assert "- old_str: missing (required)" in answers[4]["result"]["content"][0]["text"]
    assert "speaking MCP on stdin and stdout" in err
