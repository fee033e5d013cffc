"""The syntax check: parse changed files with tree-sitter and report ERROR and MISSING nodes."""

from __future__ import annotations

import functools
import importlib
import posixpath
from types import MappingProxyType

from tree_sitter import Language, Node, Parser

from kestrel.workspace.verify.failures import Failure

MAX_PER_FILE = 5
_SNIPPET_CHARS = 40

# The grammar table mirrors `kestrel.context.languages`: the layer contract keeps `workspace`
# and `context` independent, so the few lines that load a grammar are repeated, not imported.
GRAMMARS = MappingProxyType(
    {
        ".py": ("tree_sitter_python", "language"),
        ".pyi": ("tree_sitter_python", "language"),
        ".js": ("tree_sitter_javascript", "language"),
        ".mjs": ("tree_sitter_javascript", "language"),
        ".cjs": ("tree_sitter_javascript", "language"),
        ".jsx": ("tree_sitter_javascript", "language"),
        ".ts": ("tree_sitter_typescript", "language_typescript"),
        ".mts": ("tree_sitter_typescript", "language_typescript"),
        ".cts": ("tree_sitter_typescript", "language_typescript"),
        ".tsx": ("tree_sitter_typescript", "language_tsx"),
        ".go": ("tree_sitter_go", "language"),
        ".rs": ("tree_sitter_rust", "language"),
        ".java": ("tree_sitter_java", "language"),
        ".c": ("tree_sitter_c", "language"),
        ".h": ("tree_sitter_c", "language"),
        ".cc": ("tree_sitter_cpp", "language"),
        ".cpp": ("tree_sitter_cpp", "language"),
        ".cxx": ("tree_sitter_cpp", "language"),
        ".hpp": ("tree_sitter_cpp", "language"),
        ".hh": ("tree_sitter_cpp", "language"),
        ".sh": ("tree_sitter_bash", "language"),
        ".bash": ("tree_sitter_bash", "language"),
    }
)
"""Lower-case file extension to the grammar module and its language factory."""


def checks_syntax(path: str) -> bool:
    """Whether the syntax check knows the language of `path`."""
    return posixpath.splitext(path)[1].lower() in GRAMMARS


@functools.cache
def _parser(suffix: str) -> Parser | None:
    grammar = GRAMMARS.get(suffix)
    if grammar is None:
        return None
    try:
        module = importlib.import_module(grammar[0])
    except ImportError:
        return None
    return Parser(Language(getattr(module, grammar[1])()))


def syntax_failures(path: str, source: bytes) -> list[Failure] | None:
    """Syntax errors in `source` (at most `MAX_PER_FILE`); None when the language is unknown."""
    parser = _parser(posixpath.splitext(path)[1].lower())
    if parser is None:
        return None
    root = parser.parse(source).root_node
    if not root.has_error:
        return []
    bad = _error_nodes(root)
    bad.sort(key=lambda node: node.start_byte)
    return [_failure(path, source, node) for node in bad[:MAX_PER_FILE]]


def _error_nodes(root: Node) -> list[Node]:
    # A stack, not recursion: deeply nested code must not hit the recursion limit.
    found: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node)
            continue
        stack.extend(child for child in node.children if child.has_error or child.is_missing)
    return found


def _failure(path: str, source: bytes, node: Node) -> Failure:
    row, byte_column = node.start_point
    line_start = source.rfind(b"\n", 0, node.start_byte) + 1
    column = len(source[line_start : line_start + byte_column].decode("utf-8", "replace")) + 1
    if node.is_missing:
        message = f"syntax error: missing `{node.type}`"
    else:
        text = source[node.start_byte : node.end_byte].decode("utf-8", "replace").strip()
        snippet = text.splitlines()[0] if text else ""
        if len(snippet) > _SNIPPET_CHARS:
            snippet = snippet[:_SNIPPET_CHARS] + "…"
        message = f"syntax error at `{snippet}`" if snippet else "syntax error"
    return Failure(
        file=path, line=row + 1, column=column, message=message, kind="syntax", tool="tree-sitter"
    )
