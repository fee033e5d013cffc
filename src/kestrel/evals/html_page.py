"""Building blocks of Kestrel's self-contained HTML pages: escaped markup, the page shell, styles.

Every piece of text goes through `tag` or `esc`, which escape it; only `Markup` built by these
functions is inserted as is. The pages carry a Content-Security-Policy that forbids scripts and any
network access, so even a rendering mistake cannot run code from an untrusted log.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable, Sequence
from typing import TypeAlias

DASH = "\N{EN DASH}"
"""What a missing value shows as."""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"
"""Inline styles only: no scripts, no fonts, no requests of any kind."""


class Markup(str):
    """Text that is already HTML: inserted as is, never escaped again."""

    __slots__ = ()


Node: TypeAlias = "str | int | float | Sequence[Node] | None"
"""What a tag may contain: markup, text (escaped), numbers, nothing, or sequences of these."""

AttrValue: TypeAlias = "str | int | float | bool | None"


def esc(value: object) -> Markup:
    """`value` as HTML text: markup unchanged, anything else escaped."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def join(*nodes: Node) -> Markup:
    """The nodes one after another, text escaped."""
    return Markup("".join(_render(node) for node in nodes))


def _render(node: Node) -> str:
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return esc(node)
    return "".join(_render(child) for child in node)


def _attributes(attrs: dict[str, AttrValue]) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        parts.append(f" {name}" if value is True else f' {name}="{esc(value)}"')
    return "".join(parts)


_VOID = frozenset({"br", "hr", "meta", "img", "col"})


def tag(name: str, /, *children: Node, **attrs: AttrValue) -> Markup:
    """An element; `class_="x"` gives `class="x"` and `aria_label` gives `aria-label`."""
    opening = f"<{name}{_attributes(attrs)}>"
    if name in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{join(*children)}</{name}>")


def page(title: str, body: Iterable[Node], *, extra_css: str = "") -> str:
    """A whole HTML document: one file, styles inline, nothing fetched."""
    head = join(
        tag("meta", charset="utf-8"),
        tag("meta", http_equiv="Content-Security-Policy", content=CSP),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("meta", name="generator", content="kestrel"),
        tag("title", title),
        tag("style", Markup(STYLE + extra_css)),
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>{head}</head>\n'
        f"<body>{join(*body)}</body>\n</html>\n"
    )


def when(value: object) -> str:
    """A timestamp (seconds since the epoch, or ISO text) as local time; a dash if unknown."""
    if isinstance(value, bool) or value is None:
        return DASH
    if isinstance(value, int | float):
        try:
            return dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
        except (OverflowError, OSError, ValueError):
            return str(value)
    return str(value)


def money(value: float | None) -> str:
    """A dollar amount with enough digits for the cents of cheap model calls."""
    if value is None:
        return DASH
    return f"${value:.4f}" if abs(value) < 10 else f"${value:,.2f}"


def count(value: float | None) -> str:
    """A token or event count, with thousands separated."""
    if value is None:
        return DASH
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def seconds(value: float | None) -> str:
    """A duration."""
    if value is None:
        return DASH
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


STYLE = """
:root { --fg:#1d2330; --muted:#5d6677; --line:#d9dee8; --bg:#f6f7fa; --card:#fff;
  --ok:#1a7f37; --ok-bg:#e6f4ea; --bad:#b42318; --bad-bg:#fdecea; --warn:#9a6700;
  --warn-bg:#fff4d6; --info:#0b5cad; --info-bg:#e8f1fb; --mono:ui-monospace,SFMono-Regular,
  Menlo,Consolas,monospace; }
* { box-sizing:border-box; }
body { margin:0; padding:24px; background:var(--bg); color:var(--fg);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
main { max-width:1180px; margin:0 auto; }
h1 { font-size:22px; margin:0 0 4px; } h2 { font-size:17px; margin:28px 0 10px; }
h3 { font-size:14px; margin:0; }
a { color:var(--info); }
.muted { color:var(--muted); }
code, pre { font-family:var(--mono); font-size:12.5px; }
pre { margin:6px 0; padding:8px 10px; background:#f1f3f7; border-radius:6px; overflow-x:auto;
  white-space:pre-wrap; word-break:break-word; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:12px 14px; margin:10px 0; }
.figures { display:grid; grid-template-columns:repeat(auto-fill,minmax(150px,1fr)); gap:10px; }
.figure { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:10px 12px; }
.figure .value { font-size:20px; font-weight:600; }
.figure .label { color:var(--muted); font-size:12px; }
.plots { display:grid; grid-template-columns:repeat(auto-fill,minmax(360px,1fr)); gap:12px; }
.plot { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px;
  margin:0; }
.plot figcaption { font-weight:600; margin:2px 4px 6px; }
.plot svg { width:100%; height:auto; display:block; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
  font-weight:600; background:#eef0f4; color:var(--muted); white-space:nowrap; }
.badge.ok { background:var(--ok-bg); color:var(--ok); }
.badge.bad { background:var(--bad-bg); color:var(--bad); }
.badge.warn { background:var(--warn-bg); color:var(--warn); }
.badge.info { background:var(--info-bg); color:var(--info); }
table { border-collapse:collapse; width:100%; background:var(--card); }
th, td { border-bottom:1px solid var(--line); padding:5px 8px; text-align:left;
  vertical-align:top; }
th { font-size:12px; color:var(--muted); font-weight:600; background:#fafbfc; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.scroll { overflow-x:auto; border:1px solid var(--line); border-radius:8px; }
details > summary { cursor:pointer; color:var(--info); margin:4px 0; }
.diff span { display:block; min-height:1em; }
.diff .add { color:var(--ok); background:var(--ok-bg); display:block; }
.diff .del { color:var(--bad); background:var(--bad-bg); display:block; }
.diff .hunk { color:var(--info); display:block; }
.diff .meta { color:var(--muted); display:block; font-weight:600; }
"""
