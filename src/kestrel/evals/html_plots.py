"""Plots drawn as inline SVG: histograms, a stacked share bar and a column chart.

The binning is a pure function (`bins`) so what a histogram shows can be tested without drawing it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kestrel.evals.html_page import DASH, Markup, Node, join, tag

WIDTH = 380
HEIGHT = 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 10, 16, 66
MAX_BINS = 12


@dataclass(frozen=True, slots=True)
class Bin:
    """Values `lo <= v < hi` (the last bin also holds `hi`) and how many there are."""

    lo: float
    hi: float
    count: int


def bins(values: Sequence[float], *, integer: bool = False, max_bins: int = MAX_BINS) -> list[Bin]:
    """Equal-width bins covering every value; whole-number bins when `integer` is set."""
    if not values:
        return []
    low, high = min(values), max(values)
    start: float
    if integer:
        start, stop = math.floor(low), math.floor(high) + 1
        width: float = max(1, math.ceil((stop - start) / max_bins))
        n = math.ceil((stop - start) / width)
    elif low == high:
        return [Bin(low, high, len(values))]
    else:
        # Sturges' rule: enough bins to show a shape, few enough that each holds something.
        n = max(1, min(max_bins, math.ceil(math.log2(len(values))) + 1))
        start, width = low, (high - low) / n
    counts = [0] * n
    for value in values:
        i = int((value - start) // width)
        counts[min(max(i, 0), n - 1)] += 1
    return [Bin(start + i * width, start + (i + 1) * width, c) for i, c in enumerate(counts)]


def _frame(label: str, kind: str, body: Node, caption: str) -> Markup:
    svg = tag(
        "svg",
        body,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        role="img",
        aria_label=label,
        data_plot=kind,
    )
    return tag("figure", tag("figcaption", caption), svg, class_="plot")


def _no_data(kind: str, caption: str) -> Markup:
    text = tag("text", "no data", x=WIDTH / 2, y=HEIGHT / 2, text_anchor="middle", fill="#5d6677")
    return _frame(f"{caption}: no data", kind, text, caption)


def _axes(max_count: int) -> Markup:
    base = HEIGHT - _BOTTOM
    return join(
        tag("line", x1=_LEFT, y1=base, x2=WIDTH - _RIGHT, y2=base, stroke="#9aa3b2"),
        tag("line", x1=_LEFT, y1=_TOP, x2=_LEFT, y2=base, stroke="#9aa3b2"),
        tag("text", max_count, x=_LEFT - 4, y=_TOP + 4, text_anchor="end", font_size=10),
        tag("text", 0, x=_LEFT - 4, y=base, text_anchor="end", font_size=10),
    )


def columns(
    items: Sequence[tuple[str, float, str]],
    *,
    kind: str,
    caption: str,
    color: str = "#3b7dd8",
) -> Markup:
    """One column per item `(axis label, value, hover text)`, heights relative to the largest."""
    if not items:
        return _no_data(kind, caption)
    top = max(value for _, value, _ in items) or 1.0
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(items)
    every = max(1, math.ceil(len(items) / 12))  # Label at most about 12 columns.
    parts: list[Node] = [_axes_value(top)]
    for i, (label, value, hover) in enumerate(items):
        h = plot_h * value / top
        x = _LEFT + i * slot
        rect = tag(
            "rect",
            tag("title", hover),
            x=round(x + slot * 0.1, 2),
            y=round(HEIGHT - _BOTTOM - h, 2),
            width=round(slot * 0.8, 2),
            height=round(h, 2),
            fill=color,
            class_="bar",
        )
        parts.append(rect)
        if i % every == 0:
            parts.append(_tick(label, x + slot / 2))
    return _frame(caption, kind, parts, caption)


def _axes_value(top: float) -> Markup:
    label = f"{top:,.0f}" if top >= 10 else f"{top:.3g}"
    base = HEIGHT - _BOTTOM
    return join(
        tag("line", x1=_LEFT, y1=base, x2=WIDTH - _RIGHT, y2=base, stroke="#9aa3b2"),
        tag("text", label, x=_LEFT - 4, y=_TOP + 4, text_anchor="end", font_size=10),
    )


def _tick(label: str, x: float) -> Markup:
    y = HEIGHT - _BOTTOM + 14
    return tag(
        "text",
        label,
        x=round(x, 2),
        y=y,
        text_anchor="end",
        font_size=10,
        transform=f"rotate(-35 {round(x, 2)} {y})",
    )


def histogram(
    values: Sequence[float],
    *,
    kind: str,
    caption: str,
    fmt: Callable[[float], str],
    integer: bool = False,
    unit: str = "tasks",
) -> Markup:
    """A histogram of `values`; each bar's hover text says its range and count."""
    groups = bins(values, integer=integer)
    if not groups:
        return _no_data(kind, caption)
    top = max(b.count for b in groups)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(groups)
    parts: list[Node] = [_axes(top)]
    for i, b in enumerate(groups):
        label = _range_label(b, fmt, integer)
        h = plot_h * b.count / top
        x = _LEFT + i * slot
        parts.append(
            tag(
                "rect",
                tag("title", f"{b.count} {unit}: {label}"),
                x=round(x + 1, 2),
                y=round(HEIGHT - _BOTTOM - h, 2),
                width=round(max(slot - 2, 1), 2),
                height=round(h, 2),
                fill="#3b7dd8",
                class_="bar",
                data_count=b.count,
            )
        )
        if b.count:
            cy = round(HEIGHT - _BOTTOM - h - 3, 2)
            parts.append(
                tag(
                    "text",
                    b.count,
                    x=round(x + slot / 2, 2),
                    y=cy,
                    text_anchor="middle",
                    font_size=10,
                )
            )
        parts.append(_tick(label, x + slot / 2))
    summary = f"{caption}: {len(values)} {unit} in {len(groups)} bins"
    return _frame(summary, kind, parts, caption)


def _range_label(b: Bin, fmt: Callable[[float], str], integer: bool) -> str:
    if integer:
        last = int(b.hi) - 1
        return str(int(b.lo)) if last == int(b.lo) else f"{int(b.lo)}{DASH}{last}"
    if b.lo == b.hi:
        return fmt(b.lo)
    return f"{fmt(b.lo)}{DASH}{fmt(b.hi)}"


def share_bar(parts: Sequence[tuple[str, int, str]], *, kind: str, caption: str) -> Markup:
    """One horizontal bar split by `(label, count, colour)`, with a legend and percentages."""
    total = sum(n for _, n, _ in parts)
    if not total:
        return _no_data(kind, caption)
    x0, bar_w, y, h = 10.0, WIDTH - 20.0, 30, 40
    shapes: list[Node] = []
    x = x0
    for label, n, colour in parts:
        if not n:
            continue
        w = bar_w * n / total
        hover = f"{label}: {n} of {total} ({100 * n / total:.0f}%)"
        shapes.append(
            tag(
                "rect",
                tag("title", hover),
                x=round(x, 2),
                y=y,
                width=round(w, 2),
                height=h,
                fill=colour,
                class_="bar",
                data_label=label,
                data_count=n,
            )
        )
        x += w
    for i, (label, n, colour) in enumerate(parts):
        ly = y + h + 26 + 20 * i
        shapes.append(tag("rect", x=x0, y=ly - 10, width=12, height=12, fill=colour))
        shapes.append(
            tag("text", f"{label}: {n} ({100 * n / total:.0f}%)", x=x0 + 18, y=ly, font_size=12)
        )
    return _frame(caption, kind, shapes, caption)
