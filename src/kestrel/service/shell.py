"""A person's own shell command, run in a session's workspace exactly as the agent's are.

The command is a `bash` call that goes through the session's tool runner: the permission rules,
the PreToolUse hooks, the shell classifier and the mode decide on it (a question waits in the
log for an answer, like any other), the sandbox runs it, checkpoints are taken around it and
PostToolUse hooks see its result. Every step is logged, so each client shows it. The call is
not part of the model's turns; when it ran, its output is added to the conversation, so the
model reads it with the person's next message.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from kestrel.agent.loop import AgentLoop
from kestrel.agent.tool_runner import ToolRunner
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ContextAdded, ToolFinished
from kestrel.protocol.messages import ToolCall

SHELL_TOOL = "bash"
CALL_PREFIX = "person-"
"""Starts the id of a call the person made, so a view can tell it from the model's."""
SOURCE = "shell"
"""The `context_added` source of a person's command and its output."""


def is_person_call(call_id: str) -> bool:
    """Whether the call with this id is a person's own command."""
    return call_id.startswith(CALL_PREFIX)


async def run_command(loop: AgentLoop, command: str) -> ToolFinished:
    """Run `command` through the session's rules and sandbox; its logged result. A denied
    command's result says why; a cancelled one is logged as interrupted."""
    if not command.strip():
        raise ConfigError("no command given: !COMMAND runs one, e.g. !git status")
    if loop.tools.kind(SHELL_TOOL) != "execute":
        raise ConfigError(f"this session has no {SHELL_TOOL} tool to run commands with")
    call = ToolCall(
        id=f"{CALL_PREFIX}{uuid.uuid4().hex[:12]}",
        name=SHELL_TOOL,
        arguments=json.dumps({"command": command}),
    )
    runner = ToolRunner(
        loop.emit,
        loop.state,
        loop.tools,
        loop.environment,
        loop.approver,
        loop.config.permission_mode or loop.state.permission_mode,
        loop.checkpointer,
        loop.read_hashes,
        loop.gate,
    )
    try:
        await runner.run_calls([call])
    except asyncio.CancelledError:
        if call.id not in loop.state.results:
            loop.emit(
                ToolFinished(
                    call_id=call.id,
                    name=call.name,
                    content="[kestrel] Interrupted: stopped by the person.",
                    is_error=True,
                    interrupted=True,
                )
            )
        raise
    result = loop.state.results[call.id]
    decided = loop.state.decisions.get(call.id)
    if decided is not None and decided.decision == "allow":
        ran = _command_of(decided.updated_arguments) or command  # As a hook rewrote it.
        text = f"The person ran `{ran}` in the workspace:\n{result.content}"
        loop.emit(ContextAdded(source=SOURCE, text=text))
    return result


def _command_of(arguments: str | None) -> str | None:
    if arguments is None:
        return None
    try:
        value = json.loads(arguments).get("command")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
