"""Tokens and dollars as a person reads them, without passing an unknown amount off as zero.

Every frontend and `kestrel sessions` shows spend through these functions, so they agree:

- tokens the server reported: `1.2k tokens`; tokens Kestrel estimated (the server sent no
  usage): `~1.2k tokens`; none at all, not even an estimate: `? tokens`;
- a priced model: `$0.0123` (`~$0.0123` when priced from estimated tokens); a model with no
  known price: `$?`, or `≥ $0.0123` when other calls of the session were priced.
"""

from __future__ import annotations

from kestrel.protocol.events_base import Totals


def compact_count(n: int) -> str:
    """`n` as `1.2k` from a thousand up, else as is."""
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def dollars(cost_usd: float, *, known: bool = True, estimated: bool = False) -> str:
    """A dollar amount: `$0.0123`, `~$0.0123` from estimated tokens, `≥ $0.0123` when only part
    of it was priced, `$?` when none of it was."""
    if not known:
        return f"≥ ${cost_usd:.4f}" if cost_usd > 0 else "$?"
    return f"{'~' if estimated else ''}${cost_usd:.4f}"


def tokens_text(totals: Totals, *, spelled: bool = False) -> str:
    """`1.2k tokens`, `~1.2k tokens` when estimated (`~1.2k tokens (estimated)` if `spelled`),
    or `? tokens` when the server reported none and nothing could be estimated."""
    count = compact_count(totals.tokens)
    if not totals.tokens_estimated:
        return f"{count} tokens"
    if totals.tokens == 0:
        return "? tokens"
    return f"~{count} tokens" + (" (estimated)" if spelled else "")


def cost_text(totals: Totals) -> str:
    """The session's cost, marked when it is estimated, a lower bound, or unknown."""
    return dollars(totals.cost_usd, known=totals.cost_known, estimated=totals.tokens_estimated)


def spend_text(totals: Totals, *, spelled: bool = False) -> str:
    """`1.2k tokens · $0.0123`, with the marks of `tokens_text` and `cost_text`."""
    return f"{tokens_text(totals, spelled=spelled)} · {cost_text(totals)}"
