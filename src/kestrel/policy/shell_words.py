"""Words and redirections of a shell syntax tree, with quotes and escapes removed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from kestrel.policy.shell_heredoc import strip_tabs

_SHORT = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    """One redirection: the operator as written (fd included) and its unquoted target."""

    op: str
    target: str
    """The file, fd or heredoc delimiter; "" when it is only known at run time."""
    body: str = ""
    raw: str = field(default="", compare=False)
    """The target as written, quotes removed, with `$VAR`s and `$(..)`s kept as text (a
    heredoc's delimiter with its quotes)."""
    """A heredoc's content."""


@dataclass(frozen=True, slots=True)
class _Word:
    value: str
    dynamic: bool
    start: int
    end: int


_DYNAMIC = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "process_substitution"}
    | {"arithmetic_expansion"}
)


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _kids(node: Node) -> list[Node]:
    return [c for c in node.children if c.is_named or c.is_missing]


def _descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
_ANSI = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI_SIMPLE |= {"t": "\t", "v": "\v"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _dq_unescape(text: str) -> str:
    return _DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] in "xuU" and len(s) > 1:
            code = int(s[1:], 16)
            return chr(code) if code <= 0x10FFFF else m.group(0)
        if s[0] in "01234567":
            return chr(int(s, 8))
        if s[0] == "c" and len(s) == 2:
            return chr(ord(s[1]) & 0x1F)
        return _ANSI_SIMPLE.get(s, s)

    return _ANSI.sub(one, body)


def _word(node: Node) -> _Word:
    value, dynamic = _decode(node)
    return _Word(value, dynamic, node.start_byte, node.end_byte)


def _decode(node: Node) -> tuple[str, bool]:
    """A word's value with quotes and escapes removed; dynamic parts are kept as written."""
    kind, text = node.type, _text(node)
    if kind == "word":
        return _unescape(text), False
    if kind == "raw_string":
        return text[1:-1], False
    if kind == "ansi_c_string":
        return _ansi_c(text[2:-1]), False
    if kind in _DYNAMIC:
        return text, True
    if kind == "string":
        return _double_quoted(node)
    if kind == "concatenation":
        parts = [_decode(c) if c.is_named else (_text(c), False) for c in node.children]
        return "".join(p for p, _ in parts), any(d for _, d in parts)
    return text, False


def _double_quoted(node: Node) -> tuple[str, bool]:
    raw, base = node.text or b"", node.start_byte
    end = len(raw) - 1 if len(raw) > 1 and raw.endswith(b'"') else len(raw)
    out, pos, dynamic = [], 1, False
    for child in node.named_children:
        if child.type in _DYNAMIC:
            a, b = child.start_byte - base, child.end_byte - base
            out += [_dq_unescape(raw[pos:a].decode("utf-8", "replace")), _text(child)]
            pos, dynamic = b, True
    out.append(_dq_unescape(raw[pos:end].decode("utf-8", "replace")))
    return "".join(out), dynamic


def _gap_words(src: bytes, start: int, end: int) -> list[_Word]:
    """Words tree-sitter dropped between a command and its first redirect (`python3 - <<EOF`)."""
    out = []
    for m in re.finditer(rb"\S+", src[start:end]):
        out.append(
            _Word(m.group().decode("utf-8", "replace"), False, start + m.start(), start + m.end())
        )
    return out


def _redirects(node: Node) -> list[Redirect]:
    if node.type == "herestring_redirect":
        value = node.named_children[0] if node.named_child_count else None
        target = _decode(value) if value is not None else ("", False)
        return [Redirect(op="<<<", target="" if target[1] else target[0], raw=target[0])]
    if node.type == "heredoc_redirect":
        op = next((_text(c) for c in node.children if not c.is_named), "<<")
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        delimiter = _unescape(_text(start)).strip("'\"") if start is not None else ""
        raw = _text(start) if start is not None else ""
        text = _body_text(node, body) if body is not None else ""
        if op == "<<-":
            text = strip_tabs(text)
        heredoc = Redirect(op=op, target=delimiter, body=text, raw=raw)
        inner = [r for c in node.named_children if c.type == "file_redirect" for r in _redirects(c)]
        return [heredoc, *inner]
    if node.type != "file_redirect":
        return []
    destinations = node.children_by_field_name("destination")
    op = "".join(_text(c) for c in node.children if c.type == "file_descriptor" or not c.is_named)
    target = _decode(destinations[0]) if destinations else ("", False)
    return [Redirect(op=op, target="" if target[1] else target[0], raw=target[0])]


def _body_text(redirect: Node, body: Node) -> str:
    """A heredoc's body from the start of its first line: tree-sitter starts the body node at
    its first non-blank character, dropping leading blank lines and indentation."""
    raw = redirect.text or b""
    start, end = body.start_byte - redirect.start_byte, body.end_byte - redirect.start_byte
    i = start
    while i > 0 and raw[i - 1 : i] in (b" ", b"\t", b"\n"):
        i -= 1
    newline = raw.find(b"\n", i)
    if 0 <= newline < start:
        start = newline + 1
    return raw[start:end].decode("utf-8", "replace")


def _spilled(node: Node) -> list[_Word]:
    """Arguments tree-sitter took for extra redirect targets: `echo > f x` passes x to echo."""
    if node.type == "heredoc_redirect":
        return [w for c in node.named_children if c.type == "file_redirect" for w in _spilled(c)]
    if node.type != "file_redirect":
        return []
    return [_word(d) for d in node.children_by_field_name("destination")[1:]]


def _owner(spans: list[tuple[int, int, int]], word: int, top: int) -> int:
    """The innermost command (wrapper or wrapped) whose words include word number `word`."""
    best, best_lo = top, -1
    for lo, hi, index in spans:
        if lo <= word < hi and lo >= best_lo:
            best, best_lo = index, lo
    return best
