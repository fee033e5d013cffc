"""Compacting a session's conversation when the person asks for it, not only when it fills the
window.

The same compaction the loop makes when the window fills (`agent.compaction`): the older turns
fold into one message holding the goal, the latest request, the fast model's summary and the
files and failures of the dropped turns; long outputs of the kept turns move to files. Asked
for by the person, it keeps only the newest turn word for word, and PreCompact hooks hear
`trigger: manual` (one that blocks or stops refuses it). The log keeps every dropped turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from kestrel.agent import compaction, window
from kestrel.agent.loop import AgentLoop
from kestrel.agent.tool_runner import hook_events
from kestrel.protocol.events import ContextCompacted
from kestrel.protocol.messages import AssistantTurn

UNLIMITED_WINDOW = 10**9
"""The room assumed when compaction is off in the settings (no window is configured)."""


@dataclass(frozen=True, slots=True)
class NotCompacted:
    """Why the conversation was left as it was."""

    reason: str


async def compact_now(loop: AgentLoop) -> ContextCompacted | NotCompacted:
    """Fold every turn but the newest into one message; the logged compaction, or why not."""
    messages = list(loop.state.messages)
    cut = compaction.split_point(messages, 0)
    if not any(isinstance(m, AssistantTurn) for m in messages[:cut]):
        return NotCompacted("the conversation has no turn older than the newest to fold")
    refused = await _pre_compact(loop)
    if refused is not None:
        return NotCompacted(refused)
    dropped = messages[:cut]
    kept, moved = window.move_outputs(loop, messages[cut:])
    summary, usage = await window.summarise(loop, dropped)
    window_tokens = loop.config.context_window
    room = (window_tokens or UNLIMITED_WINDOW) - loop.config.max_output_tokens
    try:
        done = compaction.compact(
            system=loop.config.system_prompt,
            messages=[*dropped, *kept],
            tools=loop.tools.specs(),
            goal=loop.state.task,
            summary=summary,
            cut=cut,
            window_tokens=room,
        )
    except compaction.ContextOverflow as exc:
        return NotCompacted(str(exc))
    event = ContextCompacted(
        message=done.message.text,
        kept=done.kept,
        dropped=len(dropped),
        transcript=compaction.transcript(dropped),
        moved=tuple(moved),
        tokens_before=window.request_tokens(loop, messages),
        tokens_after=window.request_tokens(loop, [done.message, *kept]),
        window_tokens=window_tokens or 0,
        usage=usage,
    )
    loop.emit(event)
    return event


async def _pre_compact(loop: AgentLoop) -> str | None:
    """Run the PreCompact hooks (logged); why they refused, or None."""
    hooks = loop.gate.hooks
    if hooks is None or not hooks.matching("PreCompact"):
        return None
    verdict = await hooks.run("PreCompact", {"trigger": "manual"})
    for ran in hook_events(verdict):
        loop.emit(ran)
    if verdict.block or verdict.stop_session:
        why = verdict.reason or verdict.stop_reason or "no reason given"
        return f"a PreCompact hook refused it: {why}"
    return None
