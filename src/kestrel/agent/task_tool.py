"""The `task` tool, which hands a task to a subagent, and what every subagent is told."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar, cast

from pydantic import BaseModel

from kestrel.agent.agent_defs import AgentDefinition
from kestrel.agent.prompt import MemoryFile
from kestrel.agent.subagents import DEFAULT_AGENT, TASK_TOOL, SubagentRunner, TaskArgs
from kestrel.protocol.messages import ToolCall
from kestrel.tools.base import ToolContext, ToolKind, ToolOutcome


class TaskTool:
    """Run a subagent on a self-contained task and get back its report."""

    name: ClassVar[str] = TASK_TOOL
    kind: ClassVar[ToolKind] = "read"
    """The call itself changes nothing; each call the subagent makes passes its own permission
    check, in a mode no wider than the parent's. A call whose subagent can change files is
    still one step of the parent (see `kind_of_call`)."""
    Args: ClassVar[type[BaseModel]] = TaskArgs
    description: ClassVar[str] = (
        "Hand a self-contained task to a subagent with a fresh context of its own: it works "
        "with its own tools and returns one report, which is this call's result. Use it for "
        "broad searches, plans and reviews whose intermediate steps you do not need to see. "
        "Several task calls in one reply run in parallel when their agents only read. The "
        "subagent sees nothing of this conversation: put everything it needs in the prompt."
    )

    def __init__(self, runner: SubagentRunner) -> None:
        self._runner = runner

    def kind_of_call(self, call: ToolCall) -> ToolKind:
        """A read when the call's subagent only reads; a command when it can edit or run
        commands: such a call runs alone, after a checkpoint that a crash inside it rolls
        the files back to, like any command."""
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            return "read"  # It fails validation and runs nothing.
        agent = arguments.get("agent") if isinstance(arguments, dict) else None
        name = agent if isinstance(agent, str) and agent else DEFAULT_AGENT
        return "execute" if self._runner.may_change_files(name) else "read"

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Run the subagent for this call."""
        return await self._runner.run(TaskArgs.model_validate(args), ctx.call_id)


def task_tool(runner: SubagentRunner) -> TaskTool:
    """The `task` tool, its description listing the agents `runner` knows."""
    listing = "\n".join(
        f"- {d.name}: {d.description}" for d in sorted(runner.definitions.values(), key=_key)
    )
    text = f"{TaskTool.description}\n\nAgents (the `agent` argument):\n{listing}"
    described = type("TaskTool", (TaskTool,), {"description": text})
    return cast(TaskTool, described(runner))


def _key(definition: AgentDefinition) -> str:
    return definition.name


def context_note(*, cwd: str, memory: Sequence[MemoryFile], today: str) -> str:
    """What every subagent is told besides its definition: the project's rules and where it is."""
    parts = [
        f"Project instructions from {item.path} (follow them):\n<memory-file>\n"
        f"{item.text.strip()}\n</memory-file>"
        for item in memory
    ]
    parts.append(f"Environment:\n- Working directory: {cwd}\n- Date: {today}")
    return "\n\n".join(parts)
