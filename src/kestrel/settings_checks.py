"""Checks across several settings at once, run on the merged settings only (a lower layer may be
fixed by a higher one): each raises `ValueError` with one sentence that shows the numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kestrel.settings import Settings

PROMPT_FLOOR_TOKENS = 4_000
"""Tokens kept for the request besides the reply: Kestrel's system prompt and tool schemas come
to about this much before the conversation's first message."""


def check_window(settings: Settings) -> None:
    """The context window must hold the reply (`max_output_tokens`) and a minimal prompt."""
    compaction = settings.compaction
    needed = settings.max_output_tokens + PROMPT_FLOOR_TOKENS
    if compaction.window_tokens > needed:
        return
    raise ValueError(
        f"compaction.window_tokens ({compaction.window_tokens:,}) must be larger than "
        f"max_output_tokens ({settings.max_output_tokens:,}) plus {PROMPT_FLOOR_TOKENS:,} tokens "
        "for the prompt; lower max_output_tokens or raise the window"
    )


def check_allowlist(settings: Settings) -> None:
    """`network = "allowlist"` needs the hosts it allows."""
    if settings.network == "allowlist" and not settings.network_allow:
        raise ValueError(
            'network = "allowlist" needs the hosts commands may reach in network_allow, '
            'e.g. network_allow = ["pypi.org", "files.pythonhosted.org"]'
        )


def check_combined(settings: Settings) -> None:
    """Every check across settings, in order; the first that fails raises."""
    check_allowlist(settings)
    check_window(settings)
