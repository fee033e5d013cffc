"""List prices of hosted models, and the cost of one call's tokens under them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens for one model family."""

    input: float
    output: float
    cache_write: float
    cache_read: float


class TokenCounts(Protocol):
    """Anything that carries the four metered token counts, such as `Usage`."""

    @property
    def input_tokens(self) -> int:
        """Input tokens neither read from nor written to the prompt cache."""
        ...

    @property
    def output_tokens(self) -> int:
        """Generated tokens, reasoning included."""
        ...

    @property
    def cache_write_tokens(self) -> int:
        """Input tokens written to the prompt cache."""
        ...

    @property
    def cache_read_tokens(self) -> int:
        """Input tokens read from the prompt cache."""
        ...


def _anthropic(input_price: float, output_price: float) -> ModelPrice:
    # Anthropic bills 5-minute cache writes at 1.25x input and cache reads at 0.1x input.
    return ModelPrice(input_price, output_price, input_price * 1.25, input_price * 0.1)


def _openai(input_price: float, output_price: float, cached_input: float) -> ModelPrice:
    # OpenAI caches automatically and charges nothing extra to write, so a write costs input.
    return ModelPrice(input_price, output_price, input_price, cached_input)


DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    # A key matches that model id and its dated snapshots ("gpt-4o-2024-08-06",
    # "claude-opus-4-5-20251101"); a key ending in "*" matches every id that starts with the
    # rest. The longest matching key wins. Models released after these entries stay unpriced
    # (cost 0, priced=False) until added here or passed as an override, rather than guessed.
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-opus-4-0": _anthropic(15.0, 75.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-6": _anthropic(5.0, 25.0),
    "claude-sonnet-4*": _anthropic(3.0, 15.0),
    "claude-haiku-4*": _anthropic(1.0, 5.0),
    "gpt-4o": _openai(2.5, 10.0, 1.25),
    "gpt-4o-mini": _openai(0.15, 0.6, 0.075),
    "gpt-4.1": _openai(2.0, 8.0, 0.5),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
    "gpt-4.1-nano": _openai(0.1, 0.4, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-5-codex": _openai(1.25, 10.0, 0.125),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005),
    "gpt-5-pro": _openai(15.0, 120.0, 15.0),
    "gpt-5.1": _openai(1.25, 10.0, 0.125),
    "gpt-5.1-codex": _openai(1.25, 10.0, 0.125),
    "gpt-5.2": _openai(1.75, 14.0, 0.175),
    "o3": _openai(2.0, 8.0, 0.5),
    "o3-mini": _openai(1.1, 4.4, 0.55),
    "o3-pro": _openai(20.0, 80.0, 20.0),
    "o4-mini": _openai(1.1, 4.4, 0.275),
}
"""Published list prices, USD per million tokens; long-context surcharges are not modelled."""

_DATE_SUFFIX = re.compile(r"-\d{4}-?\d{2}-?\d{2}")


def _matches(key: str, model: str) -> bool:
    if key.endswith("*"):
        return model.startswith(key[:-1])
    if model == key:
        return True
    return model.startswith(key) and _DATE_SUFFIX.fullmatch(model[len(key) :]) is not None


def find_price(model: str, overrides: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model` by its longest matching key; `overrides` extend and replace defaults."""
    table = {**DEFAULT_PRICES, **(overrides or {})}
    # Routers such as OpenRouter prefix the vendor ("openai/gpt-4o"); the list price is the same.
    name = model.rsplit("/", 1)[-1]
    keys = [key for key in table if _matches(key, name)]
    return table[max(keys, key=len)] if keys else None


def price(
    counts: TokenCounts, model: str, overrides: Mapping[str, ModelPrice] | None = None
) -> tuple[float, bool]:
    """Cost in USD of `counts` on `model`, and whether the model was priced at all.

    Models missing from the table (a local vLLM or Ollama server) cost 0 with `priced` False.
    """
    entry = find_price(model, overrides)
    if entry is None:
        return 0.0, False
    cost = (
        counts.input_tokens * entry.input
        + counts.output_tokens * entry.output
        + counts.cache_write_tokens * entry.cache_write
        + counts.cache_read_tokens * entry.cache_read
    ) / 1_000_000
    return cost, True
