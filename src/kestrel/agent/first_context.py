"""The first context of a new session: what the context engine finds for the task, added before
the model's first turn, optionally reordered by the `fast` model (`kestrel.tools.rerank`).

It runs once, when a new session starts (never on resume: the log already holds it), and never
stops a session: an index that cannot be read or a reranking call that fails leaves a note or
the engine's order, and the session goes on as it would without it.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kestrel.agent.state import FIRST_CONTEXT_SOURCE
from kestrel.agent.usage_estimate import spent
from kestrel.context.model import SearchResult
from kestrel.policy.injection import frame, scan
from kestrel.protocol.errors import KestrelError, ProviderError
from kestrel.protocol.events import ContextAdded, InjectionFlagged
from kestrel.protocol.messages import Completion, Usage
from kestrel.tools.rerank import Ranked, read_order, render, reordered, rerank_request

if TYPE_CHECKING:
    from kestrel.agent.loop import AgentLoop

CodeSearch = Callable[[str, int], Awaitable[SearchResult]]
"""Ranks the workspace's files for a text: (text, how many files) -> the engine's result."""
SOURCE = FIRST_CONTEXT_SOURCE
SCREENED_AS = "the context engine"
"""How the first context is named when its text is flagged (`InjectionFlagged.name`)."""


async def add_first_context(loop: AgentLoop) -> None:
    """Emit the first context for the session's task, when the loop is configured for one."""
    config = loop.config
    search = loop.code_search
    if search is None or config.first_context_files <= 0 or not loop.state.task.strip():
        return
    wanted = max(config.first_context_files, config.rerank_candidates)
    try:
        result = await search(loop.state.task, wanted)
    except (KestrelError, OSError, sqlite3.Error, ValueError) as exc:
        # A damaged or unreadable index costs the first context, never the session.
        loop.emit(ContextAdded(source=SOURCE, text=f"(the code index could not be read: {exc})"))
        return
    if not result.files:
        return
    ranked, usage = Ranked(result.files, reranked=False), None
    if config.rerank_candidates > 1 and len(result.files) > 1:
        ranked, usage = await _rerank(loop, result)
    text = render(ranked, result, config.first_context_files)
    if ranked.note:
        text += f"\n({ranked.note})"
    loop.emit(ContextAdded(source=SOURCE, text=_screened(loop, text), usage=usage))


def _screened(loop: AgentLoop, text: str) -> str:
    """The text framed as data when the repository's paths or names read like instructions.

    A hostile repository names its files as it likes (a path may hold spaces, even a line
    break): what the engine lists is screened like any tool result before the model reads it.
    """
    findings = scan(text)
    if not findings:
        return text
    described = tuple(f.describe() for f in findings)
    loop.emit(InjectionFlagged(call_id="", name=SCREENED_AS, findings=described))
    return frame(text, SCREENED_AS, findings)


async def _rerank(loop: AgentLoop, result: SearchResult) -> tuple[Ranked, Usage | None]:
    """The fast model's order of the engine's best candidates, and what the call spent."""
    files = result.files[: loop.config.rerank_candidates]
    request = rerank_request(loop.state.task, files)
    on_retry, on_switch = loop._reporters(uuid.uuid4().hex[:12], "fast")
    reply, usage = "", None
    try:
        stream = loop.streamer(request, role="fast", on_retry=on_retry, on_switch=on_switch)
        async for part in stream:
            if isinstance(part, Completion):
                reply, usage = part.message.text, spent(part, request)
    except ProviderError as exc:
        why = f"the reranking model failed ({exc}); the engine's order is kept"
        return Ranked(result.files, reranked=False, note=why), usage
    order = read_order(reply, len(files))
    if order is None:
        why = "the reranking model's answer named no candidate; the engine's order is kept"
        return Ranked(result.files, reranked=False, note=why), usage
    head = reordered(files, order)
    return Ranked((*head, *result.files[len(files) :]), reranked=True), usage
