"""Pricing table lookups and cost arithmetic."""

from __future__ import annotations

import pytest

from kestrel.models.pricing import DEFAULT_PRICES, ModelPrice, find_price, price
from kestrel.protocol.messages import Usage


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4-6", "claude-sonnet-4*"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4*"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4*"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5", "gpt-5"),
        ("o3-2025-04-16", "o3"),
        ("o3-mini", "o3-mini"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("openai/gpt-4o", "gpt-4o"),
    ],
)
def test_dated_and_routed_ids_find_their_family(model: str, key: str) -> None:
    assert find_price(model) == DEFAULT_PRICES[key]


@pytest.mark.parametrize(
    "model",
    ["llama3.1:8b", "Qwen/Qwen2.5-Coder-32B-Instruct", "gpt-5.4-mini", "claude-opus-5", "gpt-4o-x"],
)
def test_unknown_models_are_unpriced(model: str) -> None:
    assert find_price(model) is None
    assert price(Usage(model=model, input_tokens=1000, output_tokens=10), model) == (0.0, False)


def test_cost_adds_all_four_counts() -> None:
    usage = Usage(
        model="claude-opus-4-1",
        input_tokens=1_000,
        output_tokens=2_000,
        cache_write_tokens=10_000,
        cache_read_tokens=100_000,
    )

    cost, priced = price(usage, "claude-opus-4-1")

    # Opus 4.1: $15 in, $75 out, $18.75 cache write, $1.50 cache read per million tokens.
    assert priced is True
    assert cost == pytest.approx(0.015 + 0.15 + 0.1875 + 0.15)


def test_overrides_extend_and_replace_the_defaults() -> None:
    local = ModelPrice(0.1, 0.2, 0.0, 0.0)
    cheaper = ModelPrice(1.0, 4.0, 1.0, 0.5)
    overrides = {"my-vllm-*": local, "gpt-4o": cheaper}

    assert find_price("my-vllm-coder", overrides) == local
    assert find_price("gpt-4o-2024-11-20", overrides) == cheaper
    assert find_price("gpt-4o-mini", overrides) == DEFAULT_PRICES["gpt-4o-mini"]
    usage = Usage(model="my-vllm-coder", input_tokens=1_000_000, output_tokens=1_000_000)
    assert price(usage, "my-vllm-coder", overrides) == (pytest.approx(0.3), True)
