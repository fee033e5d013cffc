"""The languages symbol extraction knows: file extensions, grammars, queries and keywords."""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tree_sitter import Node

from kestrel.context.model import SymbolKind

EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {
        ".py": "python",
        ".pyi": "python",
        ".js": "javascript",
        ".mjs": "javascript",
        ".cjs": "javascript",
        ".jsx": "javascript",
        ".ts": "typescript",
        ".tsx": "tsx",
        ".go": "go",
        ".rs": "rust",
        ".java": "java",
        ".c": "c",
        ".h": "c",
        ".cc": "cpp",
        ".cpp": "cpp",
        ".cxx": "cpp",
        ".hpp": "cpp",
        ".hh": "cpp",
        ".hxx": "cpp",
    }
)
"""Lower-case file extension to language name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LanguageSpec:
    """How to load one grammar and what to ask of its syntax trees.

    `query` captures `@def` on definition nodes, `@ref` on referenced names, `@ref.cap` on names
    kept only when capitalised (likely types, not locals), and `@import*` on import sources (see
    `import_strings`). `kinds` gives the kind of definition nodes whose kind never varies.
    """

    module: str
    factory: str
    query: str
    keywords: frozenset[str]
    kinds: Mapping[str, SymbolKind]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# `self`-like receivers are not keywords, but as references they only add noise.
_RECEIVERS = "self cls this super Self"

_PYTHON = """
(function_definition) @def
(class_definition) @def
(type_alias_statement) @def
(module (expression_statement (assignment left: (identifier))) @def)
(call function: (identifier) @ref)
(attribute attribute: (identifier) @ref)
(attribute object: (identifier) @ref.cap)
(argument_list (identifier) @ref.cap)
(keyword_argument value: (identifier) @ref.cap)
(type (identifier) @ref)
(generic_type (identifier) @ref)
(decorator (identifier) @ref)
(raise_statement (identifier) @ref)
(except_clause (identifier) @ref)
(import_statement name: (dotted_name) @import.name)
(import_statement name: (aliased_import name: (dotted_name) @import.name))
(import_from_statement) @import.from
"""

_JS_COMMON = """
(function_declaration) @def
(generator_function_declaration) @def
(class_declaration) @def
(method_definition) @def
(variable_declarator
  value: [(arrow_function) (function_expression) (generator_function)]) @def
(call_expression function: (identifier) @ref)
(member_expression property: (property_identifier) @ref)
(member_expression object: (identifier) @ref.cap)
(new_expression constructor: (identifier) @ref)
(arguments (identifier) @ref.cap)
(import_statement source: (string (string_fragment) @import))
(export_statement source: (string (string_fragment) @import))
(call_expression function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @import))
  (#eq? @_require "require"))
(call_expression function: (import)
  arguments: (arguments . (string (string_fragment) @import)))
"""

_JSX = """
(jsx_opening_element name: (identifier) @ref.cap)
(jsx_self_closing_element name: (identifier) @ref.cap)
"""

_JAVASCRIPT = (
    _JS_COMMON
    + _JSX
    + """
(field_definition value: [(arrow_function) (function_expression)]) @def
(class_heritage (identifier) @ref)
"""
)

_TYPESCRIPT = (
    _JS_COMMON
    + """
(function_signature) @def
(abstract_class_declaration) @def
(interface_body (method_signature) @def)
(abstract_method_signature) @def
(interface_declaration) @def
(type_alias_declaration) @def
(enum_declaration) @def
(internal_module) @def
(module) @def
(public_field_definition value: [(arrow_function) (function_expression)]) @def
(extends_clause value: (identifier) @ref)
(type_identifier) @ref
(import_require_clause source: (string (string_fragment) @import))
"""
)

_GO = """
(function_declaration) @def
(method_declaration) @def
(type_spec) @def
(type_alias) @def
(method_elem) @def
(call_expression function: (identifier) @ref)
(selector_expression field: (field_identifier) @ref)
(type_identifier) @ref
(import_spec path: (_) @import)
"""

_RUST = """
(function_item) @def
(function_signature_item) @def
(struct_item) @def
(union_item) @def
(enum_item) @def
(trait_item) @def
(type_item) @def
(mod_item body: (_)) @def
(impl_item) @def
(call_expression function: (identifier) @ref)
(field_expression field: (field_identifier) @ref)
(scoped_identifier path: (identifier) @ref)
(scoped_identifier name: (identifier) @ref)
(type_identifier) @ref
(macro_invocation macro: (identifier) @ref)
(use_declaration argument: (_) @import.use)
(mod_item !body name: (identifier) @import.mod)
(extern_crate_declaration name: (identifier) @import)
"""

_JAVA = """
(class_declaration) @def
(record_declaration) @def
(interface_declaration) @def
(annotation_type_declaration) @def
(enum_declaration) @def
(method_declaration) @def
(constructor_declaration) @def
(method_invocation name: (identifier) @ref)
(method_invocation object: (identifier) @ref.cap)
(field_access field: (identifier) @ref)
(field_access object: (identifier) @ref.cap)
(type_identifier) @ref
(marker_annotation name: (identifier) @ref)
(annotation name: (identifier) @ref)
(import_declaration [(scoped_identifier) (identifier)] @import.name)
"""

_C = """
(function_definition) @def
(declaration declarator: (function_declarator)) @def
(declaration declarator: (pointer_declarator declarator: (function_declarator))) @def
(struct_specifier name: (_) body: (_)) @def
(union_specifier name: (_) body: (_)) @def
(enum_specifier name: (_) body: (_)) @def
(type_definition) @def
(call_expression function: (identifier) @ref)
(field_expression field: (field_identifier) @ref)
(type_identifier) @ref
(preproc_include path: (_) @import)
"""

_CPP = (
    _C
    + """
(class_specifier name: (_) body: (_)) @def
(namespace_definition) @def
(alias_declaration) @def
(field_declaration declarator: (function_declarator)) @def
(field_declaration declarator: (pointer_declarator declarator: (function_declarator))) @def
(field_declaration declarator: (reference_declarator (function_declarator))) @def
(qualified_identifier name: (identifier) @ref)
(namespace_identifier) @ref
(template_function name: (identifier) @ref)
"""
)

_JS_KEYWORDS = """
break case catch class const continue debugger default delete do else export extends finally
for function if import in instanceof new return switch throw try typeof var void while with
yield let static enum await implements package protected interface private public async get
set of from as null true false undefined arguments
"""
_TS_KEYWORDS = """
abstract any boolean constructor declare keyof module namespace never number object readonly
string symbol type unknown infer is asserts override satisfies bigint
"""
_C_KEYWORDS = """
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Bool _Complex _Atomic _Noreturn _Static_assert NULL
"""
_CPP_KEYWORDS = """
alignas alignof and asm bool catch class constexpr const_cast decltype delete dynamic_cast
explicit export false friend mutable namespace new noexcept not nullptr operator or private
protected public reinterpret_cast static_assert static_cast template thread_local throw true
try typeid typename using virtual wchar_t override final concept requires co_await co_return
co_yield consteval constinit
"""

_PYTHON_WORDS = _words(" ".join([*keyword.kwlist, *keyword.softkwlist, _RECEIVERS]))
_JS_WORDS = _words(_JS_KEYWORDS + _RECEIVERS)
_TS_WORDS = _JS_WORDS | _words(_TS_KEYWORDS)
_C_WORDS = _words(_C_KEYWORDS)
_CPP_WORDS = _C_WORDS | _words(_CPP_KEYWORDS + " this")

_GO_WORDS = _words(
    """
    break case chan const continue default defer else fallthrough for func go goto if import
    interface map package range return select struct switch type var nil true false iota
    """
)
_RUST_WORDS = _words(
    """
    as async await break const continue crate dyn else enum extern false fn for if impl in let
    loop match mod move mut pub ref return self Self static struct super trait true type unsafe
    use where while abstract become box do final macro override priv typeof unsized virtual
    yield try union
    """
)
_JAVA_WORDS = _words(
    """
    abstract assert boolean break byte case catch char class const continue default do double
    else enum extends final finally float for goto if implements import instanceof int
    interface long native new package private protected public return short static strictfp
    super switch synchronized this throw throws transient try void volatile while var record
    yield sealed permits true false null
    """
)

_PYTHON_KINDS: Mapping[str, SymbolKind] = {
    "function_definition": "function",
    "class_definition": "class",
    "type_alias_statement": "type",
}
_JS_KINDS: Mapping[str, SymbolKind] = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "function_signature": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "method_definition": "method",
    "method_signature": "method",
    "abstract_method_signature": "method",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "module",
    "module": "module",
}
_GO_KINDS: Mapping[str, SymbolKind] = {
    "function_declaration": "function",
    "method_declaration": "method",
    "method_elem": "method",
    "type_alias": "type",
}
_RUST_KINDS: Mapping[str, SymbolKind] = {
    "function_item": "function",
    "function_signature_item": "function",
    "struct_item": "struct",
    "union_item": "struct",
    "enum_item": "enum",
    "trait_item": "trait",
    "type_item": "type",
    "mod_item": "module",
}
_JAVA_KINDS: Mapping[str, SymbolKind] = {
    "class_declaration": "class",
    "record_declaration": "class",
    "interface_declaration": "interface",
    "annotation_type_declaration": "interface",
    "enum_declaration": "enum",
    "method_declaration": "method",
    "constructor_declaration": "method",
}
_C_KINDS: Mapping[str, SymbolKind] = {
    "struct_specifier": "struct",
    "union_specifier": "struct",
    "enum_specifier": "enum",
    "class_specifier": "class",
    "namespace_definition": "module",
    "alias_declaration": "type",
}


def _spec(
    module: str,
    query: str,
    keywords: frozenset[str],
    kinds: Mapping[str, SymbolKind],
    factory: str = "language",
) -> LanguageSpec:
    return LanguageSpec(module=module, factory=factory, query=query, keywords=keywords, kinds=kinds)


_TS_MODULE = "tree_sitter_typescript"
SPECS: Mapping[str, LanguageSpec] = MappingProxyType(
    {
        "python": _spec("tree_sitter_python", _PYTHON, _PYTHON_WORDS, _PYTHON_KINDS),
        "javascript": _spec("tree_sitter_javascript", _JAVASCRIPT, _JS_WORDS, _JS_KINDS),
        "typescript": _spec(_TS_MODULE, _TYPESCRIPT, _TS_WORDS, _JS_KINDS, "language_typescript"),
        "tsx": _spec(_TS_MODULE, _TYPESCRIPT + _JSX, _TS_WORDS, _JS_KINDS, "language_tsx"),
        "go": _spec("tree_sitter_go", _GO, _GO_WORDS, _GO_KINDS),
        "rust": _spec("tree_sitter_rust", _RUST, _RUST_WORDS, _RUST_KINDS),
        "java": _spec("tree_sitter_java", _JAVA, _JAVA_WORDS, _JAVA_KINDS),
        "c": _spec("tree_sitter_c", _C, _C_WORDS, _C_KINDS),
        "cpp": _spec("tree_sitter_cpp", _CPP, _CPP_WORDS, _C_KINDS),
    }
)
"""Every supported language by name; grammar modules are imported only when first used."""


def import_strings(source: bytes, capture: str, node: Node) -> list[str]:
    """The module strings one `@import*` capture stands for, as the file writes them."""
    if capture == "import":
        return [node_text(source, node).strip().strip("\"'`")]
    if capture == "import.name":
        return [_compact(source, node)]
    if capture == "import.from":
        return _python_from(source, node)
    if capture == "import.use":
        return _rust_use(source, node)
    if capture == "import.mod":
        return [f"mod:{node_text(source, node)}"]
    return []


def _python_from(source: bytes, node: Node) -> list[str]:
    # `from a import b` yields `a` and `a.b`: `b` may be a submodule rather than a name.
    module = node.child_by_field_name("module_name")
    if module is None:
        return []
    base = _compact(source, module)
    joiner = "" if base.endswith(".") else "."
    names = [base]
    for child in node.children_by_field_name("name"):
        target = child.child_by_field_name("name") if child.type == "aliased_import" else child
        if target is not None:
            names.append(f"{base}{joiner}{_compact(source, target)}")
    return names


def _rust_use(source: bytes, node: Node) -> list[str]:
    # One path per leaf of a use tree: `use a::{b, c::d}` yields `a::b` and `a::c::d`. A stack,
    # not recursion, so that no nesting depth can raise.
    paths: list[str] = []
    pending: list[tuple[str, Node]] = [("", node)]
    while pending:
        prefix, item = pending.pop()
        kind = item.type
        if kind == "scoped_use_list":
            path, items = item.child_by_field_name("path"), item.child_by_field_name("list")
            inner = _joined(prefix, _compact(source, path)) if path is not None else prefix
            if items is not None:
                pending.append((inner, items))
        elif kind == "use_list":
            pending.extend((prefix, child) for child in reversed(item.named_children))
        elif kind in ("use_as_clause", "use_wildcard"):
            path = item.child_by_field_name("path")
            target = path if path is not None else first_named(item)
            if target is not None:
                pending.append((prefix, target))
        elif kind == "self":
            paths.append(prefix)  # `use a::{self}` names `a` itself
        elif kind in ("identifier", "scoped_identifier", "crate", "super", "metavariable"):
            paths.append(_joined(prefix, _compact(source, item)))
    return paths


def _joined(prefix: str, tail: str) -> str:
    return f"{prefix}::{tail}" if prefix and tail else prefix or tail


def node_text(source: bytes, node: Node) -> str:
    """The source text `node` spans; invalid UTF-8 is replaced, never raised."""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def first_named(node: Node) -> Node | None:
    """The first named child of `node`, if any."""
    return node.named_children[0] if node.named_child_count else None


def _compact(source: bytes, node: Node) -> str:
    return "".join(node_text(source, node).split())
