"""What runs before the model's first turn of a run: the SessionStart hooks (once per process),
the session's first context (once per session), then the UserPromptSubmit hooks for a message
not answered yet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.agent import window
from kestrel.agent.first_context import add_first_context
from kestrel.protocol.events import ContextAdded, PromptBlocked, SessionFinished
from kestrel.protocol.messages import AssistantTurn

if TYPE_CHECKING:
    from kestrel.agent.loop import AgentLoop


async def run(loop: AgentLoop) -> SessionFinished | None:
    """None when the run goes on; else how the session finished (a hook stopped it)."""
    if not loop._session_hooks_ran:
        loop._session_hooks_ran = True
        resumed = any(isinstance(m, AssistantTurn) for m in loop.state.messages)
        verdict = await loop._hook("SessionStart", {"source": "resume" if resumed else "startup"})
        if verdict is not None and verdict.stop_session:
            return loop._finish("hook", window.stopped_by(verdict))
        if verdict is not None and verdict.additional_context:
            loop.emit(ContextAdded(source="SessionStart hook", text=verdict.additional_context))
        if not resumed and not loop.state.first_context:
            await add_first_context(loop)
    prompt = loop.state.unanswered_prompt
    if prompt is None:
        return None
    verdict = await loop._hook("UserPromptSubmit", {"prompt": prompt})
    if verdict is None:
        return None
    if verdict.block or verdict.stop_session:
        reason = verdict.reason or verdict.stop_reason or "a UserPromptSubmit hook refused it"
        loop.emit(PromptBlocked(reason=reason))
        return loop._finish("hook", f"the prompt was blocked: {reason}")
    if verdict.additional_context:
        loop.emit(ContextAdded(source="UserPromptSubmit hook", text=verdict.additional_context))
    return None
