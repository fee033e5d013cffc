"""A whole session whose first model is overloaded moves to the next one, conversation intact.

Both models are real provider adapters talking to loopback servers in their own wire formats:
the first speaks the Anthropic Messages API and answers 529, the second an OpenAI-compatible
Chat Completions endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from wire_server import (
    WireServer,
    anthropic_sse,
    claude_end,
    claude_error,
    claude_start,
    claude_text,
    gpt_chunk,
    gpt_tool_delta,
    gpt_usage,
    json_reply,
    openai_sse,
    serving,
)

from kestrel import app
from kestrel.agent.loop import AgentLoop
from kestrel.agent.ports import DenyingApprover
from kestrel.agent.session import start_session
from kestrel.protocol.events import (
    Limits,
    ModelCompleted,
    ModelRequestStarted,
    ModelSwitched,
    Record,
    SessionFinished,
)
from kestrel.sandbox.local import LocalExecutor
from kestrel.settings import Settings
from kestrel.settings_load import load_settings
from kestrel.settings_trust_actions import review, store_for, trust
from kestrel.store.memory import MemoryStore

PRIMARY = "anthropic:claude-sonnet-4-6"
BACKUP = "openai:gpt-4.1"
FILE_TEXT = "print('hello from app.py')\n"
TASK = "What does app.py print?"


@pytest.fixture
def backup() -> Iterator[WireServer]:
    """A second server, for the model the first one fails over to."""
    yield from serving()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "app.py").write_text(FILE_TEXT)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return root


def settings_for(root: Path, primary_url: str, backup_url: str) -> Settings:
    (root / ".kestrel").mkdir(exist_ok=True)
    (root / ".kestrel" / "settings.toml").write_text(
        'sandbox = "none"\n'
        f'data_dir = "{root.parent / "data"}"\n'
        "[models]\n"
        "main = [\n"
        f'  {{ model = "{PRIMARY}", base_url = "{primary_url}" }},\n'
        f'  {{ model = "{BACKUP}", base_url = "{backup_url}" }},\n'
        "]\n"
    )
    # Endpoints, the sandbox and the data dir in a repository's file need the user's trust.
    trust([review(root / ".kestrel" / "settings.toml")], store_for(env={}, home=root.parent))
    return load_settings(root, env={}, flags={}, home=root.parent)


def make_session(root: Path, settings: Settings) -> AgentLoop:
    store = MemoryStore()
    session_id = start_session(
        store,
        task=TASK,
        cwd=root,
        model=settings.model,
        permission_mode="default",
        limits=Limits(),
        version="test",
    )
    parts = app.LoopParts(approver=DenyingApprover(), executor=LocalExecutor(), checkpoints=False)
    return app.build_loop(store, session_id, settings, root, parts)


def overloaded() -> Any:
    return json_reply(529, claude_error("overloaded_error", "Overloaded"))


def gpt_reads_app_py() -> Any:
    return openai_sse(
        [
            gpt_chunk({"role": "assistant", "content": ""}, model="gpt-4.1"),
            gpt_chunk(gpt_tool_delta(0, "", call_id="call_gpt_1", name="read_file")),
            gpt_chunk(gpt_tool_delta(0, '{"path": "app.py"}')),
            gpt_chunk({}, finish_reason="tool_calls"),
            gpt_usage(900, 12),
        ]
    )


def claude_answers(text: str) -> Any:
    return anthropic_sse([claude_start("claude-sonnet-4-6"), *claude_text(0, text), *claude_end()])


def events_of(records: Sequence[Record], kind: type) -> list[Any]:
    return [r.event for r in records if isinstance(r.event, kind)]


async def test_an_overloaded_model_hands_the_same_conversation_to_the_next(
    wire: WireServer, backup: WireServer, project: Path
) -> None:
    # Step 1: the primary is overloaded, so the backup answers with a tool call.
    # Step 2: each step starts at the top of the list again, and the primary is back.
    wire.push(overloaded(), claude_answers("It prints a greeting."))
    backup.push(gpt_reads_app_py())
    loop = make_session(project, settings_for(project, wire.url, backup.url))

    finished = await loop.run()

    assert finished.reason == "done" and finished.final_text == "It prints a greeting."
    assert finished.totals.turns == 2
    records = loop.store.read(loop.session_id)
    (switch,) = events_of(records, ModelSwitched)
    assert (switch.role, switch.from_model, switch.to_model) == ("main", PRIMARY, BACKUP)
    assert switch.error_kind == "Overloaded"
    started = events_of(records, ModelRequestStarted)
    assert [(s.model, s.role) for s in started] == [(PRIMARY, "main"), (PRIMARY, "main")]
    assert switch.request_id == started[0].request_id
    completed = events_of(records, ModelCompleted)
    assert [c.usage.model for c in completed] == ["gpt-4.1", "claude-sonnet-4-6"]

    # The backup received the very conversation the primary refused: system prompt, tools, task.
    refused, retried = wire.received[0].body, backup.received[0].body
    assert len(backup.received) == 1
    system = retried["messages"][0]
    assert system["role"] == "system" and system["content"] == refused["system"][0]["text"]
    assert retried["messages"][1:] == [{"role": "user", "content": TASK}]
    assert refused["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": TASK, "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert [t["function"]["name"] for t in retried["tools"]] == [
        t["name"] for t in refused["tools"]
    ]

    # And the conversation goes on from there intact: the primary sees the backup's call and
    # the file it read.
    second = wire.received[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[0]["content"][0]["text"] == TASK
    (tool_use,) = second[1]["content"]
    assert (tool_use["type"], tool_use["id"], tool_use["name"]) == (
        "tool_use",
        "call_gpt_1",
        "read_file",
    )
    assert tool_use["input"] == {"path": "app.py"}
    (result,) = second[2]["content"]
    assert result["tool_use_id"] == "call_gpt_1" and "hello from app.py" in result["content"]
    assert events_of(records, SessionFinished) == [finished]


async def test_when_every_model_fails_the_session_ends_with_the_last_error(
    wire: WireServer, backup: WireServer, project: Path
) -> None:
    wire.push(overloaded())
    backup.push(json_reply(400, {"error": {"message": "bad tool schema", "type": "invalid"}}))
    loop = make_session(project, settings_for(project, wire.url, backup.url))

    finished = await loop.run()

    assert finished.reason == "error" and "BadRequest" in finished.detail
    records = loop.store.read(loop.session_id)
    assert [e.to_model for e in events_of(records, ModelSwitched)] == [BACKUP]
    assert len(wire.received) == 1 and len(backup.received) == 1
    assert json.dumps(backup.received[0].body).count(TASK) == 1
