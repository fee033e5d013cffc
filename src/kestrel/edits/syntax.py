"""A syntax check after an edit, with tree-sitter, for languages whose grammars are installed."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

_GRAMMARS = {
    ".py": ("tree_sitter_python", "language"),
    ".pyi": ("tree_sitter_python", "language"),
    ".js": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"),
    ".cjs": ("tree_sitter_javascript", "language"),
    ".jsx": ("tree_sitter_javascript", "language"),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
    ".rs": ("tree_sitter_rust", "language"),
}
MAX_REPORTED = 5


@cache
def _parser(suffix: str) -> Any | None:
    grammar = _GRAMMARS.get(suffix)
    if grammar is None:
        return None
    try:
        tree_sitter = importlib.import_module("tree_sitter")
        module = importlib.import_module(grammar[0])
    except ImportError:
        return None
    language = tree_sitter.Language(getattr(module, grammar[1])())
    return tree_sitter.Parser(language)


def syntax_error_lines(path: str, text: str) -> tuple[int, ...] | None:
    """1-based lines where the parse finds errors; `None` when the language is not checked."""
    dot = path.rfind(".")
    parser = _parser(path[dot:].lower()) if dot != -1 else None
    if parser is None:
        return None
    root = parser.parse(text.encode("utf-8")).root_node
    if not root.has_error:
        return ()
    lines: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            lines.add(node.start_point[0] + 1)
            continue
        stack.extend(child for child in node.children if child.has_error or child.is_missing)
    return tuple(sorted(lines))


def new_syntax_errors(path: str, before: str | None, after: str) -> str:
    """A note for the model when the edit introduced syntax errors (empty when it did not)."""
    now = syntax_error_lines(path, after)
    if not now:
        return ""
    had = syntax_error_lines(path, before) if before is not None else ()
    if had is not None and len(now) <= len(had):
        return ""
    shown = ", ".join(str(n) for n in now[:MAX_REPORTED])
    more = f" and {len(now) - MAX_REPORTED} more" if len(now) > MAX_REPORTED else ""
    return (
        f"Warning: {path} now has syntax errors (at lines {shown}{more}) that it did not have "
        "before; the edit was kept, fix them with another edit."
    )
