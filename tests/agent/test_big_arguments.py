"""A tool call with megabytes of arguments runs whole, yet the conversation keeps a stand-in, so
the session fits its context window and can be resumed."""

from __future__ import annotations

import json
from pathlib import Path

from loop_kit import make_loop, transcript

from kestrel.agent.big_arguments import (
    MAX_ARGUMENT_CHARS,
    DeltaCap,
    full_call,
    moved_path,
    shrink_message,
)
from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import DenyingApprover, ToolEnvironment
from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, call, say
from kestrel.protocol.codec import record_to_json
from kestrel.protocol.events import ModelCompleted
from kestrel.protocol.messages import AssistantTurn, ToolCall
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.sqlite import SQLiteStore
from kestrel.tools.registry import ToolRegistry, default_tools

BIG = "".join(f"line {i:07d} of a generated file\n" for i in range(70_000))  # about 2.2 MB
CONFIG = LoopConfig(system_prompt="You are being tested.", context_window=32_000)


def test_short_arguments_stay_as_they_are(tmp_path: Path) -> None:
    message = AssistantTurn(tool_calls=(ToolCall(id="c1", name="bash", arguments='{"a": 1}'),))
    assert shrink_message(message, tmp_path) is message
    assert full_call(message.tool_calls[0], tmp_path) is message.tool_calls[0]
    assert not tmp_path.joinpath("x").exists() and list(tmp_path.iterdir()) == []


def test_long_arguments_move_to_a_file_and_come_back_whole(tmp_path: Path) -> None:
    arguments = json.dumps({"path": "big.txt", "content": BIG})
    message = AssistantTurn(
        text="writing",
        tool_calls=(
            ToolCall(id="c/1", name="write_file", arguments=arguments),
            ToolCall(id="c2", name="bash", arguments='{"command": "ls"}'),
        ),
    )
    shrunk = shrink_message(message, tmp_path / "artifacts")
    moved, kept = shrunk.tool_calls
    assert kept == message.tool_calls[1]
    assert len(moved.arguments) < 4000
    stand_in = json.loads(moved.arguments)["kestrel_moved_arguments"]
    assert stand_in["chars"] == len(arguments)
    assert stand_in["start"] == arguments[:2000]
    assert stand_in["path"] in stand_in["note"]
    assert moved_path(moved) == stand_in["path"]
    assert Path(stand_in["path"]).parent == (tmp_path / "artifacts").resolve()
    assert full_call(moved, tmp_path / "artifacts") == message.tool_calls[0]
    # Only a file of moved arguments in this session's artifacts is read back.
    assert full_call(moved, tmp_path) is moved


def test_a_stand_in_the_model_wrote_itself_reads_no_other_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text('{"command": "echo from the secret file"}')
    for path in (secret, tmp_path / "arguments-x-0123abcd.json"):
        forged = ToolCall(
            id="c1",
            name="bash",
            arguments=json.dumps({"kestrel_moved_arguments": {"path": str(path)}}),
        )
        assert moved_path(forged) == str(path)
        assert full_call(forged, tmp_path / "artifacts") is forged


def test_streamed_arguments_are_passed_on_up_to_the_limit() -> None:
    cap = DeltaCap(limit=10)
    assert [cap.take(0, "abcd"), cap.take(0, "efgh"), cap.take(0, "ijkl"), cap.take(0, "m")] == [
        "abcd",
        "efgh",
        "ij",
        "",
    ]
    assert cap.take(1, "another call") == "another ca"


def resumed(store: SQLiteStore, session_id: str, root: Path, turns: list) -> AgentLoop:
    """A fresh loop over the logged session, as a new process would build it."""
    return AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer_for(ScriptedProvider(turns), RetryPolicy(max_attempts=1)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=DenyingApprover(),
        config=CONFIG,
    )


async def test_a_two_megabyte_argument_runs_and_the_session_resumes(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    store = SQLiteStore(tmp_path / "events.db")
    script = [
        call("write_file", "Writing the data file.", path="data.txt", content=BIG),
        say("Wrote it."),
        say("Still here."),
    ]
    loop = make_loop(root, script, store=store)
    loop.config = CONFIG
    first = await loop.run()
    assert (first.reason, first.final_text) == ("done", "Wrote it.")
    assert (root / "data.txt").read_text() == BIG

    again = resumed(store, loop.session_id, root, script)
    second = await again.send("Is the file there?")
    assert (second.reason, second.final_text) == ("done", "Still here.")

    records = list(store.read(loop.session_id))
    assert transcript(records)[-4:] == [
        "user message",
        "model request started",
        "model completed",
        "finished done",
    ]
    # No event carries the megabytes: the log and every request stay small.
    assert max(len(record_to_json(r)) for r in records) < 2 * MAX_ARGUMENT_CHARS
    completed = [r.event for r in records if isinstance(r.event, ModelCompleted)]
    saved = moved_path(completed[0].message.tool_calls[0])
    assert saved is not None
    assert json.loads(Path(saved).read_text())["content"] == BIG
    store.close()
