"""Checks that a parse can be trusted: heredocs read the way bash reads them, redirection
targets on the operator's line, and where inline code starts in a command's words."""

from __future__ import annotations

from tree_sitter import Node

from kestrel.policy.shell_heredoc import read_heredocs
from kestrel.policy.shell_options import _inline_code
from kestrel.policy.shell_words import _descendants, _redirects

__all__ = [
    "code_word",
    "heredocs_agree",
    "misplaced_reserved_word",
    "number_target",
    "odd_node",
    "split_redirect",
]

_RESERVED = frozenset({"fi", "then", "done", "do", "else", "elif", "esac", "in", "}", ";;", "]]"})


def split_redirect(root: Node, src: bytes) -> bool:
    """Whether a redirection's target starts on a later line than its operator: bash calls
    that a syntax error, tree-sitter reads on into the next line."""
    for node in _descendants(root):
        if node.type not in ("file_redirect", "herestring_redirect"):
            continue
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        if targets and b"\n" in src[node.start_byte : targets[0].start_byte]:
            return True
    return False


def number_target(root: Node, src: bytes) -> bool:
    """Whether a redirection's target is a number glued to the next operator (`>2>&1`): bash
    reads `2>` as a descriptor and finds the first `>` without a target."""
    for node in _descendants(root):
        if node.type != "file_redirect":
            continue
        if any(not c.is_named and (c.text or b"").endswith(b"&") for c in node.children):
            continue  # `2>&1>x`: after `>&` bash takes the digits as the target
        for target in node.children_by_field_name("destination"):
            if target.type == "number" and src[target.end_byte : target.end_byte + 1] in (
                b">",
                b"<",
            ):
                return True
    return False


def heredocs_agree(code: str, root: Node) -> bool:
    """Whether tree-sitter's heredocs are the ones a line-by-line reading finds."""
    mine = read_heredocs(code)
    if mine is None or not all(h.closed for h in mine):
        return False
    nodes = sorted(
        (n for n in _descendants(root) if n.type == "heredoc_redirect"), key=lambda n: n.start_byte
    )
    theirs = [r for n in nodes for r in _redirects(n) if r.op in ("<<", "<<-")]
    if len(theirs) != len(mine):
        return False
    return all(
        (r.target, r.body) == (h.delimiter, h.body) for r, h in zip(theirs, mine, strict=True)
    )


def code_word(words: tuple[str, ...]) -> int:
    """The index of the first word that makes `words` run inline code (`-c` in `python -c`)."""
    for k in range(1, min(len(words), 64)):
        if _inline_code(words[: k + 1]) is not None:
            return k
    return 1


_COMMAND_PARTS = frozenset(
    {"command_name", "word", "raw_string", "string", "number", "concatenation", "comment"}
    | {"variable_assignment", "simple_expansion", "expansion", "command_substitution"}
    | {"process_substitution", "ansi_c_string", "translated_string", "arithmetic_expansion"}
    | {"file_redirect", "herestring_redirect", "heredoc_redirect", "brace_expression", "ERROR"}
    | {"=~", "==", "=", "!="}
)
_CASE_ENDS = frozenset({";;", ";&", ";;&"})


def odd_node(root: Node) -> str | None:
    """Syntax tree-sitter accepts and bash does not: `;;` outside `case`, a parenthesis glued
    to a command's words (`print('x')`); a description of the first one, or None."""
    for node in _descendants(root):
        parent = node.parent
        if node.type in _CASE_ENDS and parent is not None and parent.type != "case_item":
            return f"{node.type} outside a case statement"
        if node.type == "command" and any(c.type not in _COMMAND_PARTS for c in node.children):
            odd = next(c for c in node.children if c.type not in _COMMAND_PARTS)
            return f"{odd.type.replace('_', ' ')} inside a command's words"
    return None


def misplaced_reserved_word(value: str, written: bytes) -> bool:
    """Whether a command's name is an unquoted reserved word (`fi`, `done`): bash rejects the
    line, tree-sitter reads a command named `fi`."""
    return value in _RESERVED and written == value.encode()
