"""Keeping the conversation inside the model's context window: when the next request would
fill it past `compact_at`, the older turns are folded into one message (see `compaction`), their
long outputs moved to files, and the fast model summarises what was dropped.

These are the agent loop's own steps, kept apart from it; they read the loop's configuration
afresh on every call (a resume may replace it).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kestrel.agent import compaction
from kestrel.agent.prompt import with_task_list
from kestrel.agent.usage_estimate import spent
from kestrel.policy.hooks import HookVerdict
from kestrel.protocol.errors import ProviderError
from kestrel.protocol.events import ContextCompacted, MovedOutput, SessionFinished
from kestrel.protocol.messages import Completion, Message, ToolResultTurn, Usage

if TYPE_CHECKING:
    from kestrel.agent.loop import AgentLoop


def stopped_by(verdict: HookVerdict) -> str:
    return (
        f"a hook stopped the session: {verdict.stop_reason or verdict.reason or 'no reason given'}"
    )


def _overflow(needed: int, room: int) -> str:
    return (
        f"the conversation needs about {needed:,} tokens, more than the {room:,} the context "
        "window leaves for input, even after compaction; start a new session or raise "
        "[compaction] window_tokens if the model allows more"
    )


def request_tokens(loop: AgentLoop, messages: list[Message]) -> int:
    return compaction.request_tokens(
        loop.config.system_prompt,
        with_task_list(messages, loop.state.todos),
        loop.tools.specs(),
    )


async def fit(loop: AgentLoop) -> SessionFinished | None:
    """Compact the conversation when the next request would fill the context window past
    `compact_at`; finish with an error when it cannot be made to fit."""
    window = loop.config.context_window
    if window is None:
        return None
    room = window - loop.config.max_output_tokens  # what the input may use
    needed = request_tokens(loop, loop.state.messages)
    if needed <= loop.config.compact_at * room:
        return None
    return await _compact(loop)


async def _compact(loop: AgentLoop) -> SessionFinished | None:
    """Fold the older turns into one message (see `compaction`); None when the session goes
    on, else how it finished (a hook stopped it, or even the newest turn does not fit)."""
    window = loop.config.context_window or 0
    room = window - loop.config.max_output_tokens
    messages = list(loop.state.messages)
    needed = request_tokens(loop, messages)
    cut = compaction.split_point(messages, int(loop.config.keep_share * window))
    if cut <= 0:
        if window and needed > room:
            return loop._finish("error", _overflow(needed, room))
        return None
    verdict = await loop._hook("PreCompact", {"trigger": "auto"})
    if verdict is not None and verdict.stop_session:
        return loop._finish("hook", stopped_by(verdict))
    dropped, kept = messages[:cut], messages[cut:]
    kept, moved = move_outputs(loop, kept)
    summary, usage = await summarise(loop, dropped)
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
        return loop._finish("error", str(exc))
    loop.emit(
        ContextCompacted(
            message=done.message.text,
            kept=done.kept,
            dropped=len(dropped),
            transcript=compaction.transcript(dropped),
            moved=tuple(moved),
            tokens_before=needed,
            tokens_after=request_tokens(loop, [done.message, *kept]),
            window_tokens=window,
            usage=usage,
        )
    )
    if request_tokens(loop, loop.state.messages) > room:
        return loop._finish("error", _overflow(request_tokens(loop, loop.state.messages), room))
    return None


async def summarise(loop: AgentLoop, dropped: list[Message]) -> tuple[str, Usage | None]:
    """The fast model's summary of the dropped turns; a note instead when it fails (the
    verbatim parts of the compacted turn do not depend on it)."""
    request = compaction.summary_request(dropped, goal=loop.state.task)
    on_retry, on_switch = loop._reporters(uuid.uuid4().hex[:12], "fast")
    try:
        stream = loop.streamer(request, role="fast", on_retry=on_retry, on_switch=on_switch)
        async for part in stream:
            if isinstance(part, Completion):
                return part.message.text, spent(part, request)
    except ProviderError as exc:
        return f"(no summary: the summarising model failed: {exc})", None
    return "(no summary: the summarising model's reply ended early)", None


def move_outputs(loop: AgentLoop, kept: list[Message]) -> tuple[list[Message], list[MovedOutput]]:
    """The kept turns with their long outputs moved to files, and what was moved."""
    store = loop.output_store
    if store is None:
        return kept, []
    paths: dict[str, str] = {}

    def keep_reference(result: ToolResultTurn) -> str:
        paths[result.call_id] = store(result)
        return paths[result.call_id]

    kept = compaction.reference_outputs(
        kept, over_chars=loop.config.move_outputs_over, store=keep_reference
    )
    moved = [
        MovedOutput(call_id=m.call_id, path=paths[m.call_id], content=m.content)
        for m in kept
        if isinstance(m, ToolResultTurn) and m.call_id in paths
    ]
    return kept, moved
