"""`bench/localization.py --rerank-model SPEC`: the first context's model reranking, measured.

For each task the engine's best `--rerank-candidates` files go to the model in the request a
session's first context sends (`kestrel.tools.rerank`), and the model's order is scored like the
engine's. The model is any `PROVIDER:MODEL` Kestrel accepts (`anthropic:...` with its key in the
environment, `openai:...`, or `scripted:FILE` to check the harness itself: a scripted model's
figures say nothing about any real model).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kestrel.app import build_provider
from kestrel.context.engine import ContextEngine
from kestrel.models.base import Provider
from kestrel.protocol.errors import ProviderError
from kestrel.protocol.messages import Completion, ModelRequest, Usage
from kestrel.tools.rerank import read_order, reordered, rerank_request


@dataclass
class Reranker:
    """One model, asked once per task; what it spent, summed."""

    provider: Provider
    candidates: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unread: int = 0
    """Tasks whose answer named no candidate, or whose call failed (the engine's order kept)."""
    asked: int = 0
    failures: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, spec: str, candidates: int) -> Reranker:
        return cls(build_provider(spec), candidates)

    def files(self, engine: ContextEngine, task: str) -> list[str]:
        """The engine's candidates for `task` in the model's order (the engine's on failure)."""
        hits = engine.search(task, k=self.candidates).files
        request = rerank_request(task, hits)
        self.asked += 1
        try:
            reply, usage = asyncio.run(_ask(self.provider, request))
        except ProviderError as exc:
            self.unread += 1
            self.failures.append(str(exc))
            return [h.path for h in hits]
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd += usage.cost_usd
        order = read_order(reply, len(hits))
        if order is None:
            self.unread += 1
            return [h.path for h in hits]
        return [h.path for h in reordered(hits, order)]

    def summary(self) -> dict[str, Any]:
        n = max(self.asked, 1)
        return {
            "model": self.provider.model,
            "tasks": self.asked,
            "input_tokens_per_task": round(self.input_tokens / n),
            "output_tokens_per_task": round(self.output_tokens / n),
            "cost_usd": round(self.cost_usd, 4),
            "unread_or_failed": self.unread,
        }


async def _ask(provider: Provider, request: ModelRequest) -> tuple[str, Usage]:
    async for part in provider.stream(request):
        if isinstance(part, Completion):
            return part.message.text, part.usage
    raise ProviderError("the reply ended without completing")
