"""The types every family of events shares: schema version, literals, limits and totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SCHEMA_VERSION = 1

PermissionMode = Literal["default", "accept-edits", "plan", "bypass"]
FinishReason = Literal["done", "error", "budget", "loop", "cancelled", "hook", "unverified", "plan"]
BudgetKind = Literal["turns", "tokens", "cost", "wall_time", "cost_per_day", "tokens_per_day"]
"""The `_per_day` budgets count every session's spend since local midnight."""
LoopPattern = Literal["repeat", "alternate", "oscillate"]
"""`repeat`: one call and result again and again; `alternate`: two calls taking turns;
`oscillate`: failing results alternating between two states, whatever calls lie between."""
ToolKind = Literal["read", "edit", "execute"]
"""Reads change nothing; edits write files in the workspace; executes run commands."""
ModelRole = Literal["main", "plan", "fast", "edit"]
"""What a model call is for; settings map each role to an ordered list of models."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Budgets for one session; `None` means unlimited."""

    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """What a session has spent so far."""

    turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    tokens_estimated: bool = False
    """True when some call's server reported no usage, so the token counts hold estimates."""
    cost_known: bool = True
    """False when some call's model has no price, so `cost_usd` is only a lower bound."""

    @property
    def tokens(self) -> int:
        """Input (cached or not) plus output tokens."""
        return (
            self.input_tokens
            + self.cache_write_tokens
            + self.cache_read_tokens
            + self.output_tokens
        )

    @property
    def total_input_tokens(self) -> int:
        """Every input token, whether read from the prompt cache, written to it, or neither."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def cache_read_share(self) -> float | None:
        """The share of input tokens read from the prompt cache; None before any input."""
        total = self.total_input_tokens
        return self.cache_read_tokens / total if total else None
