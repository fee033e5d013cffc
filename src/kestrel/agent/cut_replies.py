"""Replies the output cap cut off: a text reply that stopped at `max_output_tokens` is not an
answer, so the model is asked to go on; after too many in a row the session ends in error rather
than passing a truncated reply off as the final one."""

from __future__ import annotations

from kestrel.protocol.events import ContextAdded, ModelCompleted

MAX_CUT_IN_A_ROW = 2
"""Text replies cut at the output cap, one after another, before the session stops."""


class CutReplies:
    """Counts text replies cut at the output cap in a row; any other reply resets the count."""

    def __init__(self, max_output_tokens: int) -> None:
        """`max_output_tokens`: the cap the requests carry, named in what the model is told."""
        self.cap = max_output_tokens
        self.in_a_row = 0

    def check(self, completion: ModelCompleted) -> ContextAdded | str | None:
        """None for a reply that finished; a note asking the model to go on for one that the cap
        cut; the reason the session stops once that happened too often in a row."""
        if completion.stop_reason != "max_tokens" or completion.message.tool_calls:
            self.in_a_row = 0
            return None
        self.in_a_row += 1
        if self.in_a_row > MAX_CUT_IN_A_ROW:
            return (
                f"the model's reply was cut at the output limit ({self.cap:,} tokens) "
                f"{self.in_a_row} times in a row, so there is no finished answer; raise "
                "max_output_tokens or ask for less"
            )
        return ContextAdded(
            source="output limit",
            text=f"Your last reply was cut off at the output limit ({self.cap:,} tokens). "
            "Continue from where it stopped, more briefly, or call a tool.",
        )
