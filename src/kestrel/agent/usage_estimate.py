"""Tokens for a model call whose server reported no usage, estimated from the text itself.

Some OpenAI-compatible servers (llama.cpp, older vLLM builds, proxies) send no `usage` block, so
the provider returns zero tokens with `tokens_reported=False`. Counting those calls as free would
let a token budget run forever; instead the counts are estimated with the same offline estimate
compaction uses (`context.budget.estimate_tokens`, which leans towards overcounting), so budgets
still stop the session, and every frontend marks the numbers as estimated.
"""

from __future__ import annotations

from dataclasses import replace

from kestrel.agent.compaction import message_tokens, request_tokens
from kestrel.models.pricing import price
from kestrel.protocol.messages import AssistantTurn, Completion, ModelRequest, Usage


def estimated_usage(usage: Usage, request: ModelRequest, reply: AssistantTurn) -> Usage:
    """`usage` as the server reported it, or, when it reported none, with the input tokens of
    `request` and the output tokens of `reply` estimated (and priced, when the model has a
    price)."""
    if usage.tokens_reported:
        return usage
    filled = replace(
        usage,
        input_tokens=request_tokens(request.system, request.messages, request.tools),
        output_tokens=message_tokens(reply),
        cache_write_tokens=0,
        cache_read_tokens=0,
    )
    if not usage.priced:
        return filled
    cost, priced = price(filled, usage.model)
    return replace(filled, cost_usd=cost, priced=priced)


def spent(part: Completion, request: ModelRequest) -> Usage:
    """What a completed call spent: nothing for a reply replayed from the response cache (its
    usage names the model and no tokens or cost), else `estimated_usage`."""
    if part.cached:
        return Usage(model=part.usage.model)
    return estimated_usage(part.usage, request, part.message)


def saved(part: Completion, request: ModelRequest) -> Usage | None:
    """For a replayed reply, what the call that first got it spent; None for a live call."""
    return estimated_usage(part.usage, request, part.message) if part.cached else None
