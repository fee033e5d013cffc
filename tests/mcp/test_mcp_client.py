"""Kestrel as an MCP client: other servers' tools over stdio (in the sandbox) and streamable
HTTP, a published server from the registry, and servers that crash, hang, flood or lie."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest
from client_kit import SANDBOX, TOOLBOX, HttpToolbox, Project, toolbox_entry

from kestrel.app_mcp_servers import probe, sandbox_launcher
from kestrel.mcp_config import server_config
from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.tools.mcp_client import McpServer, McpServerFailed

needs_bwrap = pytest.mark.skipif(SANDBOX != "bwrap", reason="bubblewrap is not installed")


def toolbox(tmp_path: Path, *, sandboxed: bool, timeout: float = 60) -> McpServer:
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    config = server_config(
        "toolbox",
        {"command": sys.executable, "args": [str(TOOLBOX), "stdio"], "timeout": timeout},
        "test",
        {},
    )
    config = type(config)(**{**_fields(config), "cwd": str(workspace)})
    launcher = None
    if sandboxed:
        launcher = sandbox_launcher(BwrapExecutor(workspace), workspace, tmp_path / "filters")
    return McpServer(config, launcher=launcher, log_dir=tmp_path / "logs")


def _fields(config: object) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}  # type: ignore[attr-defined]


async def test_a_crash_and_a_hang_each_cost_one_call_and_the_server_comes_back(
    tmp_path: Path,
) -> None:
    server = toolbox(tmp_path, sandboxed=False, timeout=2)
    try:
        with pytest.raises(McpServerFailed) as crashed:
            await server.call("crash", {})
        assert "boom: crashing on purpose" in str(crashed.value)
        assert "starts again on the next call" in str(crashed.value)
        with pytest.raises(McpServerFailed) as hung:
            await server.call("hang", {})
        assert "did not answer within 2 s" in str(hung.value)
        again = await server.call("add", {"a": 2, "b": 3})
    finally:
        await server.close()
    assert again.content[0].text == "5"  # type: ignore[union-attr]
    notices = "\n".join(server.notices)
    assert "exited during a call" in notices and "was stopped" in notices
    assert notices.count("is being restarted") == 2


async def test_a_server_that_keeps_crashing_is_given_up_on(tmp_path: Path) -> None:
    server = toolbox(tmp_path, sandboxed=False)
    messages = []
    try:
        for _ in range(6):
            with pytest.raises(McpServerFailed) as failed:
                await server.call("crash", {})
            messages.append(str(failed.value))
    finally:
        await server.close()
    assert "is not started again" in messages[-1]


async def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    config = server_config("gone", {"command": "no-such-mcp-server-here"}, "test", {})
    listing = await probe(McpServer(config, log_dir=tmp_path))
    assert isinstance(listing, str)
    assert "MCP server 'gone' could not be started" in listing


@needs_bwrap
async def test_a_stdio_server_runs_in_the_sandbox_seeing_the_workspace_only(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    confined = toolbox(tmp_path, sandboxed=True)
    free = toolbox(tmp_path, sandboxed=False)
    try:
        inside = await confined.call("peek", {"path": str(secret)})
        wrote = await confined.call("note", {"text": "from the sandbox"})
        outside = await free.call("peek", {"path": str(secret)})
    finally:
        await confined.close()
        await free.close()
    assert inside.content[0].text.startswith("hidden")  # type: ignore[union-attr]
    assert outside.content[0].text == "visible: the host's secret"  # type: ignore[union-attr]
    assert not wrote.is_error
    assert (tmp_path / "work" / "notes.txt").read_text() == "from the sandbox\n"


async def test_streamable_http_with_a_bearer_header(tmp_path: Path) -> None:
    http = HttpToolbox("s3cret")
    try:
        good = server_config(
            "remote",
            {"type": "http", "url": http.url, "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "test",
            {"TOKEN": "s3cret"},
        )
        bad = server_config(
            "remote",
            {"type": "http", "url": http.url, "headers": {"Authorization": "Bearer wrong"}},
            "test",
            {},
        )
        server = McpServer(good, log_dir=tmp_path)
        try:
            listing = await server.listing()
            added = await server.call("add", {"a": 20, "b": 22})
        finally:
            await server.close()
        refused = await probe(McpServer(bad, log_dir=tmp_path))
    finally:
        http.stop()
    assert "add" in [tool.name for tool in listing.tools]
    assert added.content[0].text == "42"  # type: ignore[union-attr]
    assert isinstance(refused, str) and "could not be started" in refused
    assert "s3cret" not in repr(good)


async def test_a_published_server_from_the_registry(tmp_path: Path) -> None:
    program = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert program is not None, "mcp-server-time is a development dependency"
    workspace = tmp_path / "work"
    workspace.mkdir()
    config = server_config("time", {"command": program}, "test", {})
    launcher = None
    if SANDBOX == "bwrap":
        launcher = sandbox_launcher(BwrapExecutor(workspace), workspace, tmp_path / "filters")
    server = McpServer(config, launcher=launcher, log_dir=tmp_path)
    try:
        listing = await server.listing()
        now = await server.call("get_current_time", {"timezone": "UTC"})
    finally:
        await server.close()
    assert "get_current_time" in [tool.name for tool in listing.tools]
    assert '"timezone": "UTC"' in now.content[0].text  # type: ignore[union-attr]


def test_a_session_calls_mcp_tools_under_rules_hooks_and_injection_flags(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path)
    project.user_servers({"toolbox": toolbox_entry()})
    events = project.run(
        [
            ("mcp__toolbox__add", {"a": 1, "b": 2}),
            ("mcp__toolbox__note", {"text": "denied by a rule"}),
            ("mcp__toolbox__big", {}),
            ("mcp__toolbox__issue", {"number": 7}),
            ("mcp__toolbox__add", {"b": 2}),
        ],
        "--deny",
        "mcp__toolbox__note",
    )
    decided = [
        (e["decision"], e["decided_by"]) for e in events if e["type"] == "permission_decided"
    ]
    results = [e for e in events if e["type"] == "tool_finished"]
    assert [e["name"] for e in results] == [
        "mcp__toolbox__add",
        "mcp__toolbox__note",
        "mcp__toolbox__big",
        "mcp__toolbox__issue",
        "mcp__toolbox__add",
    ]
    assert decided[0] == ("allow", "mode")  # a read-only tool: allowed like read_file
    assert decided[1] == ("deny", "rule")
    assert results[0]["content"] == "3"
    big = results[2]
    assert big["truncated"] and big["full_output_path"]
    assert len(big["content"]) < 40_000
    assert Path(big["full_output_path"]).stat().st_size > 5_000_000
    flagged = [e for e in events if e["type"] == "injection_flagged"]
    assert [e["name"] for e in flagged] == ["mcp__toolbox__issue"]
    assert "missing required argument 'a'" in results[-1]["content"]


def test_hooks_and_ask_rules_see_mcp_tools_by_name(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.user_servers({"toolbox": toolbox_entry()})
    hook = "echo 'no peeking' >&2; exit 2"
    (project.config / "settings.toml").write_text(
        '[permissions]\nask = ["mcp__toolbox__add"]\n'
        '[[hooks.PreToolUse]]\nmatcher = "mcp__toolbox__peek"\n'
        f"[[hooks.PreToolUse.hooks]]\ncommand = {hook!r}\n"
    )
    events = project.run(
        [
            ("mcp__toolbox__peek", {"path": "app.py"}),
            ("mcp__toolbox__add", {"a": 1, "b": 1}),
            ("mcp__toolbox__note", {"text": "allowed"}),
        ],
        "--allow",
        "mcp__toolbox__note",
    )
    decided = [
        (e["decision"], e["decided_by"]) for e in events if e["type"] == "permission_decided"
    ]
    # Nobody can answer the ask rule in a headless run, as for any tool.
    assert decided == [("deny", "hook"), ("deny", "headless"), ("allow", "rule")]
    asked = [e for e in events if e["type"] == "permission_decided"][1]
    assert "rule mcp__toolbox__add" in asked["asked"]
    assert list((tmp_path / "data").rglob("notes.txt"))


def test_a_crash_in_a_session_is_an_event_and_the_next_call_works(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.user_servers({"toolbox": toolbox_entry()})
    events = project.run(
        [("mcp__toolbox__crash", {}), ("mcp__toolbox__add", {"a": 4, "b": 4})],
        "--allow",
        "mcp__toolbox",
    )
    results = [e for e in events if e["type"] == "tool_finished"]
    assert results[0]["is_error"] and "boom: crashing on purpose" in results[0]["content"]
    assert results[1]["content"] == "8"
    errors = [e for e in events if e["type"] == "error" and e["error_kind"] == "mcp_server"]
    assert any("exited during a call" in e["message"] for e in errors)
    assert all(e["recoverable"] for e in errors)


def test_a_repository_mcp_json_waits_for_trust(tmp_path: Path) -> None:
    project = Project(tmp_path)
    entry = {"mcpServers": {"toolbox": toolbox_entry()}}
    (project.root / ".mcp.json").write_text(json.dumps(entry))
    before = project.run([("mcp__toolbox__add", {"a": 5, "b": 5})])
    said = [e["message"] for e in before if e["type"] == "error"]
    assert len(said) == 1 and ".mcp.json names MCP servers (toolbox)" in said[0]
    assert "kestrel trust" in said[0]
    unknown = next(e for e in before if e["type"] == "tool_finished")
    assert unknown["is_error"] and "unknown tool 'mcp__toolbox__add'" in unknown["content"]
    tested = project.kestrel("mcp", "test", "toolbox", check=False)
    assert tested.returncode == 2 and "not started until you trust" in tested.stderr
    trusted = project.kestrel("trust")
    assert "mcp_servers.toolbox" in trusted.stdout
    after = project.run([("mcp__toolbox__add", {"a": 5, "b": 5})])
    assert [e["content"] for e in after if e["type"] == "tool_finished"] == ["10"]
    assert not [e for e in after if e["type"] == "error"]


def test_results_reach_the_session_in_order_when_calls_overlap(tmp_path: Path) -> None:
    server = toolbox(tmp_path, sandboxed=False)

    async def both() -> list[str]:
        try:
            done = await asyncio.gather(*(server.call("add", {"a": i, "b": i}) for i in range(8)))
        finally:
            await server.close()
        return [r.content[0].text for r in done]  # type: ignore[union-attr]

    assert asyncio.run(both()) == [str(2 * i) for i in range(8)]


def test_the_model_lists_and_reads_a_server_resource(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.user_servers({"toolbox": toolbox_entry()})
    events = project.run(
        [
            ("list_mcp_resources", {}),
            ("read_mcp_resource", {"server": "toolbox", "uri": "notes://readme"}),
            ("read_mcp_resource", {"server": "nope", "uri": "notes://readme"}),
        ]
    )
    results = [e for e in events if e["type"] == "tool_finished"]
    assert "notes://readme  readme" in results[0]["content"]
    assert results[1]["content"] == "A toolbox for tests."
    assert results[2]["is_error"] and "servers: toolbox" in results[2]["content"]
