"""Definitions, references and imports of one source file, read from its tree-sitter syntax tree."""

from __future__ import annotations

import functools
import importlib
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tree_sitter import Language, Node, Parser, Query, QueryCursor

from kestrel.context.languages import EXTENSIONS, SPECS, first_named, import_strings, node_text
from kestrel.context.model import FileSymbols, Symbol, SymbolKind

__all__ = ["extract_symbols", "language_for", "outline"]

_SIGNATURE_LIMIT = 200
_MIN_REFERENCE = 3
_CONSTANT = re.compile(r"_*[A-Z][A-Z0-9_]*")
_LEADING_NAME = re.compile(r"\w+")
_CLASS_LIKE: frozenset[str] = frozenset({"class", "struct", "interface", "trait", "enum"})
# Aliases and constants never enclose other definitions; a C `typedef struct {..} T` would
# otherwise make its struct `T.S`.
_NOT_CONTAINERS: frozenset[str] = frozenset({"type", "constant"})
_ANNOTATIONS = frozenset({"decorator", "marker_annotation", "annotation"})
_C_FUNCTION_NAMES = frozenset(
    {"identifier", "field_identifier", "destructor_name", "operator_name"}
)


def language_for(path: str) -> str | None:
    """The language of `path` by its extension, or None when symbols cannot be extracted."""
    return EXTENSIONS.get(posixpath.splitext(path)[1].lower())


def extract_symbols(path: str, text: str) -> FileSymbols | None:
    """Definitions, references and imports of `text`; None when `path` has no supported language."""
    language = language_for(path)
    if language is None:
        return None
    grammar, spec = _grammar(language), SPECS[language]
    # `replace` keeps lone surrogates (from undecodable files) from raising.
    source = text.encode("utf-8", "replace")
    tree = Parser(grammar.language).parse(source)
    captures = QueryCursor(grammar.query).captures(tree.root_node)
    define = _DEFINERS[language]
    found = [
        f for node in captures.get("def", ()) if (f := define(node, source, spec.kinds)) is not None
    ]
    defined = frozenset(f.name for f in found)
    return FileSymbols(
        language=language,
        definitions=_qualify(found),
        references=_references(source, captures, spec.keywords | defined),
        imports=_imports(source, captures),
    )


def outline(symbols: FileSymbols) -> str:
    """One `LINE: SIGNATURE` line per definition, indented two spaces per enclosing definition."""
    lines: list[str] = []
    enclosing: list[Symbol] = []
    for symbol in symbols.definitions:
        while enclosing and not _encloses(enclosing[-1], symbol):
            enclosing.pop()
        lines.append(f"{'  ' * len(enclosing)}{symbol.line}: {symbol.signature}")
        enclosing.append(symbol)
    return "\n".join(lines)


def _encloses(outer: Symbol, inner: Symbol) -> bool:
    # Line ranges alone would nest two one-line siblings; the qualname prefix tells them apart.
    return (
        outer.line <= inner.line
        and inner.end_line <= outer.end_line
        and inner.qualname.startswith(outer.qualname + ".")
    )


@dataclass(frozen=True, slots=True)
class _Grammar:
    language: Language
    query: Query


@functools.cache
def _grammar(name: str) -> _Grammar:
    spec = SPECS[name]
    factory = getattr(importlib.import_module(spec.module), spec.factory)
    language = Language(factory())
    return _Grammar(language=language, query=Query(language, spec.query))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """A definition before it knows its enclosing definitions."""

    start: int
    end: int
    line: int
    end_line: int
    name: str
    kind: SymbolKind
    signature: str
    scope: tuple[str, ...] = ()  # qualifiers written in the definition: Go receivers, C++ `A::`
    emit: bool = True  # False for Rust `impl` blocks, which only qualify their methods


def _qualify(found: list[_Found]) -> tuple[Symbol, ...]:
    # Outer before inner: by start, then the longer span first.
    stack: list[tuple[_Found, str]] = []
    symbols: list[Symbol] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        while stack and (stack[-1][0].end < f.end or stack[-1][0].end <= f.start):
            stack.pop()
        parent = stack[-1] if stack else None
        kind = f.kind
        if kind == "function" and parent is not None and parent[0].kind in _CLASS_LIKE:
            kind = "method"
        qualname = ".".join([*([parent[1]] if parent else []), *f.scope, f.name])
        if kind not in _NOT_CONTAINERS:
            stack.append((f, qualname))
        if f.emit:
            symbols.append(
                Symbol(
                    name=f.name,
                    qualname=qualname,
                    kind=kind,
                    line=f.line,
                    end_line=f.end_line,
                    signature=f.signature,
                )
            )
    return tuple(symbols)


def _references(
    source: bytes, captures: Mapping[str, list[Node]], skip: frozenset[str]
) -> tuple[str, ...]:
    raw = {source[n.start_byte : n.end_byte] for n in captures.get("ref", ())}
    for node in captures.get("ref.cap", ()):
        name = source[node.start_byte : node.end_byte]
        if name[:1].isupper():
            raw.add(name)
    names = {b.decode("utf-8", "replace") for b in raw}
    return tuple(sorted(n for n in names if len(n) >= _MIN_REFERENCE and n not in skip))


def _imports(source: bytes, captures: Mapping[str, list[Node]]) -> tuple[str, ...]:
    found: list[tuple[int, str]] = []
    for name, nodes in captures.items():
        if not name.startswith("import"):
            continue
        for node in nodes:
            found.extend((node.start_byte, i) for i in import_strings(source, name, node))
    found.sort(key=lambda pair: pair[0])
    return tuple(dict.fromkeys(i for _, i in found if i))


# --- definitions: one function per grammar family, each told the fixed kinds of its nodes ------

_Kinds = Mapping[str, SymbolKind]
_Definer = Callable[[Node, bytes, _Kinds], _Found | None]


def _plain(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    kind = kinds.get(node.type)
    return _make(source, node, _name(source, node), kind, body=_body(node)) if kind else None


def _python(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    if node.type == "expression_statement":
        assignment = first_named(node)
        left = assignment.child_by_field_name("left") if assignment is not None else None
        name = node_text(source, left) if left is not None else ""
        return _make(source, node, name, "constant") if _CONSTANT.fullmatch(name) else None
    if node.type == "type_alias_statement":
        left = node.child_by_field_name("left")
        match = _LEADING_NAME.match(node_text(source, left)) if left is not None else None
        return _make(source, node, match.group() if match else "", "type")
    parent = node.parent
    decorated = parent if parent is not None and parent.type == "decorated_definition" else None
    kind = kinds[node.type]
    return _make(source, node, _name(source, node), kind, outer=decorated, body=_body(node))


def _javascript(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    kind = node.type
    if kind not in ("variable_declarator", "field_definition", "public_field_definition"):
        symbol_kind = kinds.get(kind)
        if symbol_kind is None:
            return None
        # A decorator may sit before `export`; `declare module "x"` is named by a string.
        parent = node.parent
        exported = parent if parent is not None and parent.type == "export_statement" else None
        name = _name(source, node).strip("\"'`")
        return _make(source, node, name, symbol_kind, outer=exported, body=_body(node))
    value = node.child_by_field_name("value")
    body = _body(value) if value is not None else None
    name = _name(source, node) or _name(source, node, "property")
    if kind != "variable_declarator":
        return _make(source, node, name, "method", body=body)
    # A lone `const f = () => ...` spans its whole declaration, keyword included.
    parent = node.parent
    whole = parent if parent is not None and parent.named_child_count == 1 else None
    start = whole.start_byte if whole is not None else None
    return _make(source, node, name, "function", outer=whole, body=body, start=start)


def _go(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    kind = node.type
    if kind == "method_declaration":
        receiver = _go_receiver(source, node)
        scope = (receiver,) if receiver else ()
        return _make(source, node, _name(source, node), "method", body=_body(node), scope=scope)
    if kind != "type_spec":
        lead = "type " if kind == "type_alias" else ""
        return _make(source, node, _name(source, node), kinds[kind], body=_body(node), lead=lead)
    shape = node.child_by_field_name("type")
    symbol_kind: SymbolKind = "type"
    body = None
    if shape is not None and shape.type == "struct_type":
        symbol_kind, body = "struct", _child_of_type(shape, "field_declaration_list")
    elif shape is not None and shape.type == "interface_type":
        symbol_kind, body = "interface", _child_of_type(shape, "{")
    return _make(source, node, _name(source, node), symbol_kind, body=body, lead="type ")


def _go_receiver(source: bytes, node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    parameter = first_named(receiver) if receiver is not None else None
    target = parameter.child_by_field_name("type") if parameter is not None else None
    while target is not None and target.type in ("pointer_type", "generic_type"):
        inner = target.child_by_field_name("type")
        target = inner if inner is not None else first_named(target)
    return node_text(source, target) if target is not None else ""


def _rust(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    if node.type != "impl_item":
        return _plain(node, source, kinds)
    # `impl<T> Trait for a::Foo<T>` qualifies its methods with `Foo`.
    target = node.child_by_field_name("type")
    wrappers = ("generic_type", "reference_type", "scoped_type_identifier", "pointer_type")
    while target is not None and target.type in wrappers:
        target = target.child_by_field_name(
            "name" if target.type == "scoped_type_identifier" else "type"
        )
    name = node_text(source, target) if target is not None else ""
    return _make(source, node, name, "class", body=_body(node), emit=False)


def _c(node: Node, source: bytes, kinds: _Kinds) -> _Found | None:
    kind = node.type
    if kind in ("function_definition", "declaration", "field_declaration"):
        parent = node.parent
        if kind == "declaration" and parent is not None and parent.type == "compound_statement":
            return None  # `T x(y);` in a body declares a variable more often than a function
        named = _c_function(source, node)
        if named is None:
            return None
        scope, name = named
        symbol_kind: SymbolKind = "method" if scope or kind == "field_declaration" else "function"
        return _make(source, node, name, symbol_kind, body=_body(node), scope=scope)
    if kind == "type_definition":
        target = node.child_by_field_name("declarator")
        while target is not None and target.type != "type_identifier":
            target = _inner_declarator(target)
        name = node_text(source, target) if target is not None else ""
        shape = node.child_by_field_name("type")
        body = _body(shape) if shape is not None else None
        found = _make(source, node, name, "type", body=body)
        if found is None or body is None:
            return found
        # `typedef struct S { ... } T`: the fields belong to the struct's own definition.
        return replace(found, signature=_capped(f"{found.signature} {{ … }} {name}"))
    found = _plain(node, source, kinds)
    # `namespace a::b { ... }` encloses its definitions in `a.b`.
    return replace(found, name=found.name.replace("::", ".")) if found is not None else None


def _c_function(source: bytes, node: Node) -> tuple[tuple[str, ...], str] | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        if declarator.type not in ("pointer_declarator", "reference_declarator"):
            return None  # a variable, or a pointer to a function
        declarator = _inner_declarator(declarator)
    target = declarator.child_by_field_name("declarator") if declarator is not None else None
    scope: list[str] = []
    while target is not None and target.type == "qualified_identifier":
        qualifier = target.child_by_field_name("scope")
        if qualifier is not None and qualifier.type == "template_type":
            qualifier = qualifier.child_by_field_name("name")
        if qualifier is not None:
            scope.append(node_text(source, qualifier))
        target = target.child_by_field_name("name")
    if target is not None and target.type == "template_function":
        target = target.child_by_field_name("name")
    if target is None or target.type not in _C_FUNCTION_NAMES:
        return None
    return tuple(scope), node_text(source, target)


def _inner_declarator(node: Node) -> Node | None:
    inner = node.child_by_field_name("declarator")
    if inner is not None:
        return inner
    return next((c for c in node.named_children if c.type.endswith("declarator")), None)


_DEFINERS: Mapping[str, _Definer] = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _javascript,
    "tsx": _javascript,
    "go": _go,
    "rust": _rust,
    "java": _plain,
    "c": _c,
    "cpp": _c,
}


# --- node helpers -------------------------------------------------------------------------------


def _make(
    source: bytes,
    node: Node,
    name: str,
    kind: SymbolKind,
    *,
    outer: Node | None = None,
    body: Node | None = None,
    scope: tuple[str, ...] = (),
    start: int | None = None,
    lead: str = "",
    emit: bool = True,
) -> _Found | None:
    if not name:
        return None  # anonymous, or a name lost to a syntax error
    span = outer if outer is not None else node
    first, last = span.start_point, span.end_point
    # A node that swallows its trailing newline ends at column 0 of the next line.
    end_row = last.row - 1 if last.column == 0 and last.row > first.row else last.row
    return _Found(
        start=span.start_byte,
        end=span.end_byte,
        line=first.row + 1,
        end_line=end_row + 1,
        name=name,
        kind=kind,
        signature=_signature(source, node, body, start, lead),
        scope=scope,
        emit=emit,
    )


def _signature(source: bytes, node: Node, body: Node | None, start: int | None, lead: str) -> str:
    begin = _header_start(node) if start is None else start
    end = node.end_byte
    if body is not None:
        end = begin
        for child in node.children:
            if child.end_byte <= body.start_byte:
                if not child.is_extra:  # skip a comment between `def f():` and its body
                    end = child.end_byte
                continue
            if child.start_byte < body.start_byte:  # the body sits inside this child
                end = body.start_byte
            break
    header = " ".join(source[begin:end].decode("utf-8", "replace").split())
    if body is None:
        header = header.removesuffix(";").rstrip()
    return _capped(lead + header)


def _capped(header: str) -> str:
    if len(header) > _SIGNATURE_LIMIT:
        return header[: _SIGNATURE_LIMIT - 1] + "…"
    return header


def _header_start(node: Node) -> int:
    # Decorators and annotations count toward a definition's lines, not its signature.
    for child in node.children:
        if child.is_extra or child.type in _ANNOTATIONS:
            continue
        if child.type != "modifiers":
            return child.start_byte
        for inner in child.children:
            if not (inner.is_extra or inner.type in _ANNOTATIONS):
                return inner.start_byte
    return node.start_byte


def _body(node: Node) -> Node | None:
    return node.child_by_field_name("body")


def _name(source: bytes, node: Node, field: str = "name") -> str:
    child = node.child_by_field_name(field)
    return node_text(source, child) if child is not None else ""


def _child_of_type(node: Node, kind: str) -> Node | None:
    return next((c for c in node.children if c.type == kind), None)
