"""A cheap, offline token estimate for code, and its inverse for filling a budget.

Source code runs at roughly 3.5 to 4 characters per token under the byte-pair encoders that
current models use (cl100k/o200k-style vocabularies; code has more punctuation and short
identifiers than prose, which runs nearer 4.5). We take 3.6 so the estimate leans towards
overcounting: a context that the estimate says fits should really fit, and shipping a tokenizer
vocabulary (megabytes, provider-specific) to save a few percent of the window is not worth it.

The arithmetic is done in integer tenths so that `estimate_tokens` and `max_chars` agree exactly:
no float rounding can make text of `max_chars(n)` characters estimate to `n + 1` tokens.
"""

from __future__ import annotations

CHARS_PER_TOKEN_TENTHS = 36
"""Characters per token, in tenths: 3.6 characters make one token."""


def estimate_tokens(text: str) -> int:
    """Estimated tokens in `text`: its length over 3.6, rounded up, so never 0 unless empty."""
    return -(-len(text) * 10 // CHARS_PER_TOKEN_TENTHS)


def max_chars(tokens: int) -> int:
    """The most characters of text whose `estimate_tokens` stays within `tokens`."""
    if tokens <= 0:
        return 0
    return tokens * CHARS_PER_TOKEN_TENTHS // 10
