"""Builders for loop tests: a real workspace, real tools, a scripted model, an in-memory log."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kestrel.agent.loop import AgentLoop, LoopConfig
from kestrel.agent.ports import Approver, Checkpointer, DenyingApprover, ToolEnvironment
from kestrel.agent.session import start_session
from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, ScriptedTurn
from kestrel.policy.gate import PermissionGate
from kestrel.protocol.events import Limits, PermissionMode, Record
from kestrel.sandbox.local import LocalExecutor
from kestrel.store.base import EventStore
from kestrel.store.memory import MemoryStore
from kestrel.tools.registry import ToolRegistry, default_tools


def make_loop(
    root: Path,
    turns: Sequence[ScriptedTurn],
    *,
    store: EventStore | None = None,
    mode: PermissionMode = "bypass",
    limits: Limits | None = None,
    approver: Approver | None = None,
    clock: Callable[[], float] = time.time,
    checkpointer: Checkpointer | None = None,
    gate: PermissionGate | None = None,
    task: str = "fix it",
) -> AgentLoop:
    """A loop over a new session in `root` that follows `turns`."""
    store = store or MemoryStore(clock=clock)
    session_id = start_session(
        store,
        task=task,
        cwd=root,
        model="scripted",
        permission_mode=mode,
        limits=limits or Limits(),
        version="test",
    )
    return AgentLoop(
        store=store,
        session_id=session_id,
        streamer=streamer_for(ScriptedProvider(turns), RetryPolicy(max_attempts=1)),
        tools=ToolRegistry(default_tools()),
        environment=ToolEnvironment(
            root=root, executor=LocalExecutor(), artifacts_dir=root.parent / "artifacts"
        ),
        approver=approver or DenyingApprover(),
        config=LoopConfig(system_prompt="You are being tested."),
        clock=clock,
        checkpointer=checkpointer,
        gate=gate or PermissionGate(),
    )


def transcript(records: Sequence[Record]) -> list[str]:
    """The log without streaming noise: one short line per event."""
    lines = []
    for record in records:
        e = record.event
        match e.type:
            case "model_text_delta" | "model_tool_call_delta" | "tool_output_chunk":
                continue
            case "tool_call_requested":
                lines.append(f"call {e.call.name}")  # type: ignore[union-attr]
            case "permission_decided":
                lines.append(f"{e.decision} by {e.decided_by}")  # type: ignore[union-attr]
            case "tool_finished":
                flag = " error" if e.is_error else ""  # type: ignore[union-attr]
                lines.append(f"result {e.name}{flag}")  # type: ignore[union-attr]
            case "session_finished":
                lines.append(f"finished {e.reason}")  # type: ignore[union-attr]
            case "loop_detected" | "budget_warning":
                lines.append(e.type)
            case _:
                lines.append(e.type.replace("_", " "))
    return lines
