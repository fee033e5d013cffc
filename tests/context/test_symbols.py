"""Symbol extraction: definitions, references and imports for each supported language."""

from __future__ import annotations

import subprocess
import sys
from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.context.model import FileSymbols, Symbol
from kestrel.context.symbols import extract_symbols, language_for, outline

Row = tuple[str, str, int, int, str]

EXAMPLE_PATHS = {
    "python": "a.py",
    "javascript": "a.js",
    "typescript": "a.ts",
    "tsx": "a.tsx",
    "go": "a.go",
    "rust": "a.rs",
    "java": "A.java",
    "c": "a.c",
    "cpp": "a.cpp",
}


def symbols_of(path: str, source: str) -> FileSymbols:
    found = extract_symbols(path, dedent(source))
    assert found is not None
    return found


def rows(path: str, source: str) -> list[Row]:
    return [
        (d.qualname, d.kind, d.line, d.end_line, d.signature)
        for d in symbols_of(path, source).definitions
    ]


# --- languages -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("src/app/models.py", "python"),
        ("typing/stubs.pyi", "python"),
        ("web/app.js", "javascript"),
        ("web/app.mjs", "javascript"),
        ("web/app.cjs", "javascript"),
        ("web/App.jsx", "javascript"),
        ("web/app.ts", "typescript"),
        ("web/App.tsx", "tsx"),
        ("cmd/main.go", "go"),
        ("src/lib.rs", "rust"),
        ("src/Main.java", "java"),
        ("src/util.c", "c"),
        ("include/util.h", "c"),
        ("src/a.cc", "cpp"),
        ("src/a.cpp", "cpp"),
        ("src/a.cxx", "cpp"),
        ("include/a.hpp", "cpp"),
        ("include/a.hh", "cpp"),
        ("include/a.hxx", "cpp"),
        ("LEGACY.PY", "python"),
        ("README.md", None),
        ("Makefile", None),
        ("script.rb", None),
        ("archive.tar.gz", None),
        ("dir.py/notes", None),
    ],
)
def test_language_for_maps_extensions(path: str, language: str | None) -> None:
    assert language_for(path) == language


def test_unsupported_extension_gives_none() -> None:
    assert extract_symbols("notes.txt", "def f():\n    pass\n") is None


@pytest.mark.parametrize(("language", "path"), sorted(EXAMPLE_PATHS.items()))
def test_empty_file_has_no_symbols(language: str, path: str) -> None:
    assert extract_symbols(path, "") == FileSymbols(language=language)


def test_nothing_is_loaded_at_import() -> None:
    probe = (
        "import sys, kestrel.context.symbols; "
        "print(sorted(m for m in sys.modules if m.startswith('tree_sitter_')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- python --------------------------------------------------------------------------------------

PYTHON = """\
    import os.path
    from .cache import get_cache as cache
    MAX_RETRIES: int = 3
    _DEFAULT_NAME = "x"
    lowercase_value = 1


    @dataclass(frozen=True)
    @total_ordering
    class Outer(Base, metaclass=Meta):
        class Inner:
            def serialize(self, value: int) -> str:  # why: the wire wants text
                def helper(x):
                    return str(x)
                return helper(value)

        async def fetch(
            self,
            url: str,
        ) -> Response:
            raise TimeoutError(url)


    def outer():
        def inner():
            pass
        return inner


    type Alias = list[int]
    """


def test_python_definitions() -> None:
    assert rows("m.py", PYTHON) == [
        ("MAX_RETRIES", "constant", 3, 3, "MAX_RETRIES: int = 3"),
        ("_DEFAULT_NAME", "constant", 4, 4, '_DEFAULT_NAME = "x"'),
        ("Outer", "class", 8, 21, "class Outer(Base, metaclass=Meta):"),
        ("Outer.Inner", "class", 11, 15, "class Inner:"),
        (
            "Outer.Inner.serialize",
            "method",
            12,
            15,
            "def serialize(self, value: int) -> str:",
        ),
        ("Outer.Inner.serialize.helper", "function", 13, 14, "def helper(x):"),
        (
            "Outer.fetch",
            "method",
            17,
            21,
            "async def fetch( self, url: str, ) -> Response:",
        ),
        ("outer", "function", 24, 27, "def outer():"),
        ("outer.inner", "function", 25, 26, "def inner():"),
        ("Alias", "type", 30, 30, "type Alias = list[int]"),
    ]


def test_python_decorated_function_starts_at_first_decorator() -> None:
    source = """\
        x = 1
        @app.route("/")
        @login_required
        async def index(request):
            return render(request)
        """
    assert rows("views.py", source) == [
        ("index", "function", 2, 5, "async def index(request):"),
    ]


def test_python_references_are_used_names_without_keywords_or_own_definitions() -> None:
    found = symbols_of("m.py", PYTHON)
    assert found.references == (
        "Base",
        "Meta",
        "Response",
        "TimeoutError",
        "dataclass",
        "int",
        "list",
        "str",
        "total_ordering",
    )


def test_python_references_keep_capitalised_arguments_and_attribute_owners() -> None:
    source = """\
        def check(obj, items):
            if isinstance(obj, Model) and obj.pk:
                return Model.objects.filter(pk__in=items)
            return len(items)
        """
    refs = symbols_of("m.py", source).references
    assert refs == ("Model", "filter", "isinstance", "len", "objects")


def test_python_imports() -> None:
    source = """\
        import os.path, sys as system
        import json
        from .x import y, z as w
        from .. import parent
        from . import sibling
        from a.b import c
        from pkg import *
        import json
        """
    assert symbols_of("m.py", source).imports == (
        "os.path",
        "sys",
        "json",
        ".x",
        ".x.y",
        ".x.z",
        "..",
        "..parent",
        ".",
        ".sibling",
        "a.b",
        "a.b.c",
        "pkg",
    )


# --- javascript and typescript -------------------------------------------------------------------


def test_javascript_definitions_and_imports() -> None:
    source = """\
        import React from "react";
        const util = require("./util");
        export * from "./reexported";

        class App extends React.Component {
          state = {};
          onClick = (event) => {
            this.setState({ clicked: true });
          };
          render() {
            return <Button onClick={this.onClick}><div /></Button>;
          }
        }

        export const add = (a, b) => a + b;
        var f = function named() {}, count = 2;
        async function load() {
          function parse(text) { return JSON.parse(text); }
          return import("./lazy");
        }
        """
    found = symbols_of("app.jsx", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("App", "class", 5, 13, "class App extends React.Component"),
        ("App.onClick", "method", 7, 9, "onClick = (event) =>"),
        ("App.render", "method", 10, 12, "render()"),
        ("add", "function", 15, 15, "const add = (a, b) =>"),
        ("f", "function", 16, 16, "f = function named()"),
        ("load", "function", 17, 20, "async function load()"),
        ("load.parse", "function", 18, 18, "function parse(text)"),
    ]
    assert found.imports == ("react", "./util", "./reexported", "./lazy")
    assert found.references == ("Button", "Component", "JSON", "React", "require", "setState")


def test_typescript_definitions() -> None:
    source = """\
        export interface Shape extends Base {
          area(): number;
          name: string;
        }
        export type Id = string | number;
        enum Color { Red, Green }
        @Component({ selector: "x" })
        export abstract class Figure<T> extends Base implements Shape {
          private handler = () => {};
          constructor(private size: number) { super(); }
          async area(): Promise<number> { return this.size; }
          abstract name(): string;
        }
        namespace Geometry {
          export function scale(s: Shape, by: number): Shape { return s; }
        }
        declare function measure(s: Shape): number;
        """
    assert rows("shapes.ts", source) == [
        ("Shape", "interface", 1, 4, "interface Shape extends Base"),
        ("Shape.area", "method", 2, 2, "area(): number"),
        ("Id", "type", 5, 5, "type Id = string | number"),
        ("Color", "enum", 6, 6, "enum Color"),
        ("Figure", "class", 7, 13, "abstract class Figure<T> extends Base implements Shape"),
        ("Figure.handler", "method", 9, 9, "private handler = () =>"),
        ("Figure.constructor", "method", 10, 10, "constructor(private size: number)"),
        ("Figure.area", "method", 11, 11, "async area(): Promise<number>"),
        ("Figure.name", "method", 12, 12, "abstract name(): string"),
        ("Geometry", "module", 14, 16, "namespace Geometry"),
        ("Geometry.scale", "function", 15, 15, "function scale(s: Shape, by: number): Shape"),
        ("measure", "function", 17, 17, "function measure(s: Shape): number"),
    ]


def test_typescript_imports_and_type_references() -> None:
    source = """\
        import { a } from "./a";
        import type { T } from "../types";
        import fs = require("fs");
        export { b } from "./b";
        const c = require("./c");
        let x: Map<string, Widget> = new Registry();
        """
    found = symbols_of("index.ts", source)
    assert found.imports == ("./a", "../types", "fs", "./b", "./c")
    assert found.references == ("Map", "Registry", "Widget", "require")


def test_tsx_component() -> None:
    source = """\
        import { Card } from "./card";
        export function List({ items }: Props): JSX.Element {
          return <Card title="x">{items.map(renderItem)}</Card>;
        }
        """
    found = symbols_of("List.tsx", source)
    assert [(d.qualname, d.kind, d.line, d.signature) for d in found.definitions] == [
        ("List", "function", 2, "function List({ items }: Props): JSX.Element"),
    ]
    assert found.imports == ("./card",)
    assert "Card" in found.references
    assert "Props" in found.references


# --- go, rust, java ------------------------------------------------------------------------------


def test_go_definitions_and_imports() -> None:
    source = """\
        package server

        import (
        \t"context"
        \tlog "github.com/sirupsen/logrus"
        )
        import "os"

        type Server struct {
        \tAddr string
        }

        type Runner interface {
        \tRun(ctx context.Context) error
        }

        type ID = string

        func (s *Server) Run(ctx context.Context) error {
        \treturn log.Errorf("x")
        }

        func (l List[T]) Len() int { return 0 }

        func New(addr string) *Server {
        \treturn &Server{Addr: addr}
        }
        """
    found = symbols_of("server.go", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("Server", "struct", 9, 11, "type Server struct"),
        ("Runner", "interface", 13, 15, "type Runner interface"),
        ("Runner.Run", "method", 14, 14, "Run(ctx context.Context) error"),
        ("ID", "type", 17, 17, "type ID = string"),
        ("Server.Run", "method", 19, 21, "func (s *Server) Run(ctx context.Context) error"),
        ("List.Len", "method", 23, 23, "func (l List[T]) Len() int"),
        ("New", "function", 25, 27, "func New(addr string) *Server"),
    ]
    assert found.imports == ("context", "github.com/sirupsen/logrus", "os")
    assert {"Context", "Errorf", "List"} <= set(found.references)


def test_rust_definitions_and_imports() -> None:
    source = """\
        use std::collections::{HashMap, hash_map::Entry as E, self};
        use crate::config::*;
        use super::util as u;
        mod parser;
        extern crate serde;

        pub struct Point<T> {
            x: T,
        }

        pub trait Shape {
            fn area(&self) -> f64;
        }

        impl<T: Clone> fmt::Display for Point<T> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "point")
            }
        }

        mod geometry {
            pub fn scale(by: f64) -> f64 { by }
        }

        type Result<T> = std::result::Result<T, Error>;
        enum Kind { A, B }
        """
    found = symbols_of("lib.rs", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("Point", "struct", 7, 9, "pub struct Point<T>"),
        ("Shape", "trait", 11, 13, "pub trait Shape"),
        ("Shape.area", "method", 12, 12, "fn area(&self) -> f64"),
        ("Point.fmt", "method", 16, 18, "fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result"),
        ("geometry", "module", 21, 23, "mod geometry"),
        ("geometry.scale", "function", 22, 22, "pub fn scale(by: f64) -> f64"),
        ("Result", "type", 25, 25, "type Result<T> = std::result::Result<T, Error>"),
        ("Kind", "enum", 26, 26, "enum Kind"),
    ]
    assert found.imports == (
        "std::collections::HashMap",
        "std::collections::hash_map::Entry",
        "std::collections",
        "crate::config",
        "super::util",
        "mod:parser",
        "serde",
    )
    assert {"Formatter", "Display", "write", "Error"} <= set(found.references)


def test_java_definitions_and_imports() -> None:
    source = """\
        package com.example;

        import java.util.List;
        import static org.junit.Assert.assertEquals;
        import java.io.*;

        @Deprecated
        public class Outer<T> extends Base implements Runnable {
            @Override
            public void run() throws IOException {
                service.submit(List.of());
            }

            Outer(int size) { super(); }

            static class Inner {}

            interface Callback {
                void call(String message);
            }

            enum Mode { ON, OFF }
        }
        """
    found = symbols_of("Outer.java", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("Outer", "class", 7, 23, "public class Outer<T> extends Base implements Runnable"),
        ("Outer.run", "method", 9, 12, "public void run() throws IOException"),
        ("Outer.Outer", "method", 14, 14, "Outer(int size)"),
        ("Outer.Inner", "class", 16, 16, "static class Inner"),
        ("Outer.Callback", "interface", 18, 20, "interface Callback"),
        ("Outer.Callback.call", "method", 19, 19, "void call(String message)"),
        ("Outer.Mode", "enum", 22, 22, "enum Mode"),
    ]
    assert found.imports == ("java.util.List", "org.junit.Assert.assertEquals", "java.io")
    assert {"Deprecated", "IOException", "List", "Override", "submit"} <= set(found.references)


# --- c and c++ -----------------------------------------------------------------------------------


def test_c_definitions_and_includes() -> None:
    source = """\
        #include <stdio.h>
        #include "list.h"

        struct node {
            int value;
            struct node *next;
        };
        typedef struct node node_t;
        typedef int (*compare_fn)(const void *, const void *);
        int count(const node_t *head);

        static char **split(const char *text,
                            char sep) {
            return tokenize(text, sep)->parts;
        }

        enum color { RED, GREEN };
        typedef struct {
            int x, y;
        } point_t;
        """
    found = symbols_of("list.c", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("node", "struct", 4, 7, "struct node"),
        ("node_t", "type", 8, 8, "typedef struct node node_t"),
        ("compare_fn", "type", 9, 9, "typedef int (*compare_fn)(const void *, const void *)"),
        ("count", "function", 10, 10, "int count(const node_t *head)"),
        ("split", "function", 12, 15, "static char **split(const char *text, char sep)"),
        ("color", "enum", 17, 17, "enum color"),
        ("point_t", "type", 18, 20, "typedef struct { … } point_t"),
    ]
    assert found.imports == ("<stdio.h>", "list.h")
    assert found.references == ("parts", "tokenize")


def test_cpp_definitions_and_includes() -> None:
    source = """\
        #include "widget.hpp"
        #include <vector>

        namespace ui {
        class Widget : public Base {
         public:
          void draw(int depth);
          int size() const { return size_; }
          Widget();
          ~Widget();
        };
        }

        void ui::Widget::draw(int depth) {
          canvas.paint(depth);
          std::move(depth);
        }

        template <typename T> void Box<T>::put(T item) {}
        Widget::~Widget() {}
        using Widgets = std::vector<Widget>;
        """
    found = symbols_of("widget.cpp", source)
    assert [(d.qualname, d.kind, d.line, d.end_line, d.signature) for d in found.definitions] == [
        ("ui", "module", 4, 12, "namespace ui"),
        ("ui.Widget", "class", 5, 11, "class Widget : public Base"),
        ("ui.Widget.draw", "method", 7, 7, "void draw(int depth)"),
        ("ui.Widget.size", "method", 8, 8, "int size() const"),
        ("ui.Widget.Widget", "method", 9, 9, "Widget()"),
        ("ui.Widget.~Widget", "method", 10, 10, "~Widget()"),
        ("ui.Widget.draw", "method", 14, 17, "void ui::Widget::draw(int depth)"),
        ("Box.put", "method", 19, 19, "void Box<T>::put(T item)"),
        ("Widget.~Widget", "method", 20, 20, "Widget::~Widget()"),
        ("Widgets", "type", 21, 21, "using Widgets = std::vector<Widget>"),
    ]
    assert found.imports == ("widget.hpp", "<vector>")
    assert {"Base", "paint", "move", "std", "vector"} <= set(found.references)


# --- robustness ----------------------------------------------------------------------------------


def test_python_syntax_error_in_a_body_keeps_every_definition() -> None:
    source = """\
        def before(a):
            return a

        def broken(a):
            x = = 1
            return x

        class After:
            def method(self):
                pass
        """
    assert [(q, k, line, end) for q, k, line, end, _ in rows("broken.py", source)] == [
        ("before", "function", 1, 2),
        ("broken", "function", 4, 6),
        ("After", "class", 8, 10),
        ("After.method", "method", 9, 10),
    ]


def test_python_syntax_error_in_a_header_keeps_what_recovery_finds() -> None:
    source = """\
        def before(a):
            return a

        def broken(:
            x = = 1

        class After:
            def method(self):
                pass
        """
    found = symbols_of("broken.py", source)
    assert found.definitions[0] == Symbol(
        name="before",
        qualname="before",
        kind="function",
        line=1,
        end_line=2,
        signature="def before(a):",
    )
    assert "method" in [d.name for d in found.definitions]


def test_javascript_with_unbalanced_braces_does_not_raise() -> None:
    found = symbols_of("broken.js", "function ok() { return 1 }\nclass A { m() { if (x) {\n")
    assert found.definitions[0].qualname == "ok"


@pytest.mark.parametrize("path", sorted(EXAMPLE_PATHS.values()))
def test_binary_and_undecodable_text_does_not_raise(path: str) -> None:
    text = "\x00\x01\xff\ufffd\udcff" * 50 + "def f(\x00):\n" + "\x7f" * 10
    found = extract_symbols(path, text)
    assert found is not None


@settings(max_examples=60, deadline=None)
@given(
    language=st.sampled_from(sorted(EXAMPLE_PATHS)),
    text=st.text(
        alphabet=st.sampled_from(list("abcXYZ_ (){}[]<>:;,.=*&#@\"'\n\t\\/")), max_size=300
    ),
)
def test_any_text_gives_ordered_well_formed_definitions(language: str, text: str) -> None:
    found = extract_symbols(EXAMPLE_PATHS[language], text)
    assert found is not None
    lines = [d.line for d in found.definitions]
    assert lines == sorted(lines)
    for d in found.definitions:
        assert 1 <= d.line <= d.end_line
        assert d.name and d.qualname.endswith(d.name)
        assert len(d.signature) <= 200
    assert list(found.references) == sorted(set(found.references))


def test_long_signature_is_collapsed_and_capped_at_200_characters() -> None:
    params = ",\n    ".join(f"parameter_{i}: int" for i in range(40))
    found = symbols_of("long.py", f"def wide(\n    {params},\n):\n    pass\n")
    signature = found.definitions[0].signature
    assert len(signature) == 200
    assert signature.startswith("def wide( parameter_0: int, parameter_1: int,")
    assert "\n" not in signature
    assert signature.endswith("…")


# --- outline -------------------------------------------------------------------------------------


def test_outline_indents_by_nesting() -> None:
    assert outline(symbols_of("m.py", PYTHON)) == "\n".join(
        [
            "3: MAX_RETRIES: int = 3",
            '4: _DEFAULT_NAME = "x"',
            "8: class Outer(Base, metaclass=Meta):",
            "  11: class Inner:",
            "    12: def serialize(self, value: int) -> str:",
            "      13: def helper(x):",
            "  17: async def fetch( self, url: str, ) -> Response:",
            "24: def outer():",
            "  25: def inner():",
            "30: type Alias = list[int]",
        ]
    )


def test_outline_does_not_nest_methods_declared_outside_their_type() -> None:
    source = """\
        type Server struct{}
        func (s *Server) Run() {}
        """
    assert outline(symbols_of("s.go", source)) == (
        "1: type Server struct\n2: func (s *Server) Run()"
    )


def test_outline_keeps_one_line_siblings_apart() -> None:
    symbols = FileSymbols(
        language="c",
        definitions=(
            Symbol(name="A", qualname="A", kind="struct", line=1, end_line=1, signature="struct A"),
            Symbol(name="B", qualname="B", kind="struct", line=1, end_line=1, signature="struct B"),
        ),
    )
    assert outline(symbols) == "1: struct A\n1: struct B"


def test_outline_of_nothing_is_empty() -> None:
    assert outline(FileSymbols(language="python")) == ""


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    depth = 3000
    rust = "use a::" + "{b::" * depth + "c" + "}" * depth + ";\n"
    assert symbols_of("deep.rs", rust).imports == ("a::" + "b::" * depth + "c",)
    python = "".join(f"{'    ' * i}def f{i}():\n" for i in range(100)) + "    " * 100 + "pass\n"
    found = symbols_of("deep.py", python)
    assert len(found.definitions) == 100
    assert found.definitions[-1].qualname == ".".join(f"f{i}" for i in range(100))
