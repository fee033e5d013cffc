"""The stable prefix comes first: instructions, memory files, then the per-session environment."""

from __future__ import annotations

from pathlib import Path

from kestrel.agent.prompt import MemoryFile, build_system_prompt
from kestrel.models.anthropic import build_params
from kestrel.protocol.messages import (
    AssistantTurn,
    ModelRequest,
    ToolCall,
    ToolResultTurn,
    UserTurn,
)
from kestrel.tools.registry import ToolRegistry, default_tools


def test_memory_files_come_before_the_directory_and_the_date(tmp_path: Path) -> None:
    memory = [MemoryFile(path=tmp_path / "AGENTS.md", text="Run ruff before committing.")]
    one = build_system_prompt(cwd=tmp_path / "a", memory=memory, today="2026-11-22")
    other = build_system_prompt(cwd=tmp_path / "b", memory=memory, today="2026-11-23")

    assert one.index("You are Kestrel") < one.index("Run ruff") < one.index("Working directory")
    assert one.rstrip().endswith("Date: 2026-11-22")
    # Two sessions in other directories, on other days, share everything up to the environment.
    shared = len(one[: one.index("Environment:")])
    assert one[:shared] == other[:shared] and "Run ruff" in one[:shared]


def test_breakpoints_close_the_stable_prefix_and_the_two_newest_turns() -> None:
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "a.py"}')
    request = ModelRequest(
        system="stable instructions",
        messages=(
            UserTurn(text="task"),
            AssistantTurn(text="reading", tool_calls=(call,)),
            ToolResultTurn(call_id="c1", name="read_file", content="1\tx = 1"),
        ),
        tools=ToolRegistry(default_tools()).specs(),
    )
    body = build_params("claude-sonnet-4-6", request)

    marked_tools = [t["name"] for t in body["tools"] if "cache_control" in t]
    assert marked_tools == [body["tools"][-1]["name"]]
    assert "cache_control" in body["system"][-1]
    marks = ["cache_control" in m["content"][-1] for m in body["messages"]]
    assert marks == [False, True, True]
