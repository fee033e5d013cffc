"""The status line: model, permission mode, context used, tokens, cost, cache reads, budget,
sandbox, background indexing. Its text comes from a pure function over the session's folded
state, so a test reads it without a screen."""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import Static

from kestrel.protocol.events import Limits, Totals


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusFacts:
    """What the status line shows, gathered from the session's log and the settings."""

    model: str
    mode: str
    sandbox: str
    totals: Totals
    limits: Limits
    context_tokens: int = 0
    """Input tokens of the last model call: how full the context window is."""
    window_tokens: int | None = None
    busy: bool = False
    queued: int = 0
    indexing: int = 0
    """Files of the repository the context engine is still reading in the background."""


def model_label(spec: str) -> str:
    """The model as the view names it: a scripted model by its script's file name only."""
    provider, _, rest = spec.partition(":")
    if provider == "scripted" and rest:
        return f"scripted:{rest.replace(chr(92), '/').rsplit('/', 1)[-1]}"
    return spec


def count(n: int) -> str:
    """`n` as a person reads it at a glance: `950`, `1.2k`, `3.4M`."""
    for size, unit in ((1_000_000, "M"), (1000, "k")):
        if n >= size:
            shown = f"{n / size:.1f}".removesuffix(".0")
            return f"{shown}{unit}"
    return str(n)


def cost(totals: Totals) -> str:
    """Dollars spent, marked when estimated (`~`), a lower bound (`≥`) or unknown (`$?`)."""
    if not totals.cost_known:
        return f"≥${totals.cost_usd:.4f}" if totals.cost_usd > 0 else "$?"
    return f"{'~' if totals.tokens_estimated else ''}${totals.cost_usd:.4f}"


def budget_left(limits: Limits, totals: Totals) -> str:
    """What the session's budgets leave: dollars, turns and tokens that are limited."""
    parts: list[str] = []
    if limits.max_cost_usd is not None:
        parts.append(f"${max(limits.max_cost_usd - totals.cost_usd, 0.0):.2f}")
    if limits.max_turns is not None:
        parts.append(f"{max(limits.max_turns - totals.turns, 0)} turns")
    if limits.max_tokens is not None:
        parts.append(f"{count(max(limits.max_tokens - totals.tokens, 0))} tok")
    return " ".join(parts) if parts else "none"


def status_text(facts: StatusFacts) -> str:
    """The whole status line, fields separated by ` │ `."""
    t = facts.totals
    context = count(facts.context_tokens)
    if facts.window_tokens:
        used = facts.context_tokens / facts.window_tokens
        context = f"{context}/{count(facts.window_tokens)} {used:.0%}"
    share = None if t.tokens_estimated else t.cache_read_share
    tokens = f"{'~' if t.tokens_estimated else ''}{count(t.tokens)} tok"
    fields = [
        ("● working" if facts.busy else "○ idle")
        + (f" +{facts.queued} queued" if facts.queued else ""),
        model_label(facts.model) if facts.model else "no model",
        facts.mode,
        f"ctx {context}",
        tokens,
        cost(t),
        f"cache {share:.0%}" if share is not None else "cache -",
        f"budget {budget_left(facts.limits, t)}",
        f"sandbox {facts.sandbox}",
    ]
    if facts.indexing:
        fields.append(f"indexing {count(facts.indexing)} files")
    return " │ ".join(fields)


class StatusLine(Static):
    """A line at the bottom of the screen with the session's standing (two when narrow)."""

    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 2;
        width: 1fr;
        background: $panel;
        color: $text-muted;
        padding: 0 1;
    }
    """

    _shown: str | None = None

    def show(self, facts: StatusFacts) -> None:
        """Redraw the line from `facts` (only when its text changed)."""
        text = status_text(facts)
        if text != self._shown:
            self._shown = text
            self.update(text)
