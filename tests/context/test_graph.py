"""The file graph: imports resolved per language, reference edges, PageRank and neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from kestrel.context.graph import (
    FileGraph,
    build_graph,
    neighbours,
    personalized_pagerank,
    resolve_imports,
)
from kestrel.context.model import FileSymbols, Symbol


def resolve(paths: list[str], importer: str, *specs: str) -> frozenset[str]:
    return resolve_imports(paths, {importer: specs})[importer]


def defines(*names: str, refs: tuple[str, ...] = (), imports: tuple[str, ...] = ()) -> FileSymbols:
    definitions = tuple(
        Symbol(name=n, qualname=n, kind="class", line=i + 1, end_line=i + 1, signature=f"class {n}")
        for i, n in enumerate(names)
    )
    return FileSymbols(language="python", definitions=definitions, references=refs, imports=imports)


def edges(graph: FileGraph) -> dict[tuple[str, str], float]:
    p = graph.paths
    return {
        (p[s], p[d]): w
        for s, d, w in zip(
            graph.src.tolist(), graph.dst.tolist(), graph.weight.tolist(), strict=True
        )
    }


# Python


PY = [
    "main.py",
    "app/__init__.py",
    "app/models.py",
    "app/util/__init__.py",
    "app/util/text.py",
    "scripts/run.py",
    "scripts/helpers.py",
]


def test_python_absolute_import_finds_module_and_package() -> None:
    found = resolve(PY, "main.py", "app.models", "app.util", "os", "numpy.linalg", "typing")
    assert found == {"app/models.py", "app/util/__init__.py"}


def test_python_from_import_of_a_name_falls_back_to_its_module() -> None:
    # `from app.models import User` arrives as both `app.models` and `app.models.User`.
    assert resolve(PY, "main.py", "app.models.User") == {"app/models.py"}
    # `from app.util import text` names a module: the module itself is the edge.
    assert resolve(PY, "main.py", "app.util.text") == {"app/util/text.py"}


def test_python_src_layout_and_detected_roots() -> None:
    paths = [
        "src/kestrel/__init__.py",
        "src/kestrel/context/__init__.py",
        "src/kestrel/context/graph.py",
        "packages/core/corelib/__init__.py",
        "packages/core/corelib/db.py",
        "src/single.py",
        "tests/test_graph.py",
    ]
    found = resolve(paths, "tests/test_graph.py", "kestrel.context.graph", "corelib.db", "single")
    assert found == {"src/kestrel/context/graph.py", "packages/core/corelib/db.py", "src/single.py"}


def test_python_relative_imports_climb_packages() -> None:
    paths = [
        "pkg/__init__.py",
        "pkg/top.py",
        "pkg/other/__init__.py",
        "pkg/other/deep.py",
        "pkg/sub/__init__.py",
        "pkg/sub/mod.py",
        "pkg/sub/sibling.py",
    ]
    assert resolve(paths, "pkg/sub/mod.py", ".sibling") == {"pkg/sub/sibling.py"}
    assert resolve(paths, "pkg/sub/mod.py", ".sibling.Thing") == {"pkg/sub/sibling.py"}
    assert resolve(paths, "pkg/sub/mod.py", ".") == {"pkg/sub/__init__.py"}
    assert resolve(paths, "pkg/sub/mod.py", "..top") == {"pkg/top.py"}
    assert resolve(paths, "pkg/sub/mod.py", "..other.deep") == {"pkg/other/deep.py"}
    assert resolve(paths, "pkg/sub/mod.py", "..") == {"pkg/__init__.py"}
    assert resolve(paths, "pkg/sub/mod.py", "....nowhere", ".missing") == frozenset()


def test_python_script_imports_its_neighbour_by_bare_name() -> None:
    assert resolve(PY, "scripts/run.py", "helpers", "json") == {"scripts/helpers.py"}


def test_python_same_module_name_in_two_roots_picks_the_nearer() -> None:
    paths = ["a/utils.py", "a/main.py", "b/pkg/__init__.py", "b/pkg/utils.py", "b/pkg/x.py"]
    assert resolve(paths, "a/main.py", "utils") == {"a/utils.py"}


# JavaScript and TypeScript


JS = [
    "web/src/app.ts",
    "web/src/util.ts",
    "web/src/esm.ts",
    "web/src/components/index.tsx",
    "web/lib/api.js",
    "web/lib/view.jsx",
]


def test_js_relative_imports_try_extensions_and_index() -> None:
    found = resolve(JS, "web/src/app.ts", "./util", "../lib/api", "./components", "../lib/view")
    assert found == {
        "web/src/util.ts",
        "web/lib/api.js",
        "web/src/components/index.tsx",
        "web/lib/view.jsx",
    }


def test_js_exact_path_and_ts_esm_js_suffix() -> None:
    assert resolve(JS, "web/src/app.ts", "../lib/api.js") == {"web/lib/api.js"}
    assert resolve(JS, "web/src/app.ts", "./esm.js") == {"web/src/esm.ts"}


def test_js_packages_and_paths_outside_the_repo_are_ignored() -> None:
    assert resolve(JS, "web/src/app.ts", "react", "@scope/pkg", "../../../x", "./gone") == set()


# Go


GO = [
    "go.mod",
    "internal/store/db.go",
    "internal/store/cache.go",
    "internal/store/db_test.go",
    "cmd/app/main.go",
    "pkg/http/server.go",
    "pkg/log/log.go",
]


def test_go_import_path_matches_longest_directory_suffix() -> None:
    found = resolve(GO, "cmd/app/main.go", "github.com/acme/app/internal/store")
    assert found == {"internal/store/db.go", "internal/store/cache.go"}  # not the _test file


def test_go_standard_library_and_other_modules_do_not_land_on_lookalikes() -> None:
    found = resolve(GO, "cmd/app/main.go", "fmt", "net/http", "log", "github.com/x/y")
    assert found == set()
    assert resolve(GO, "cmd/app/main.go", "github.com/acme/app/pkg/http") == {"pkg/http/server.go"}


def test_go_dotless_module_path() -> None:
    assert resolve(GO, "cmd/app/main.go", "myapp/pkg/log") == {"pkg/log/log.go"}


# Rust


RS = [
    "Cargo.toml",
    "src/lib.rs",
    "src/config.rs",
    "src/config/parse.rs",
    "src/net/mod.rs",
    "src/net/tcp.rs",
    "src/net/udp.rs",
]


def test_rust_mod_declarations() -> None:
    assert resolve(RS, "src/lib.rs", "mod:config", "mod:net") == {"src/config.rs", "src/net/mod.rs"}
    assert resolve(RS, "src/net/mod.rs", "mod:tcp") == {"src/net/tcp.rs"}
    assert resolve(RS, "src/config.rs", "mod:parse") == {"src/config/parse.rs"}


def test_rust_crate_super_and_self_paths() -> None:
    found = resolve(
        RS,
        "src/net/tcp.rs",
        "super::udp::Socket",
        "crate::config::Settings",
        "crate::config::parse::parse",
        "std::io::Read",
        "serde::Deserialize",
    )
    assert found == {"src/net/udp.rs", "src/config.rs", "src/config/parse.rs"}
    assert resolve(RS, "src/net/tcp.rs", "crate::Error") == {"src/lib.rs"}
    assert resolve(RS, "src/net/mod.rs", "self::tcp::Stream") == {"src/net/tcp.rs"}


# Java


JAVA = [
    "src/main/java/com/acme/app/Main.java",
    "src/main/java/com/acme/model/User.java",
    "src/main/java/com/acme/model/Order.java",
    "src/main/java/com/acme/util/Strings.java",
]


def test_java_class_imports() -> None:
    main = "src/main/java/com/acme/app/Main.java"
    found = resolve(JAVA, main, "com.acme.model.User", "java.util.List", "org.junit.Test")
    assert found == {"src/main/java/com/acme/model/User.java"}
    found = resolve(JAVA, main, "static com.acme.util.Strings.join")
    assert found == {"src/main/java/com/acme/util/Strings.java"}
    everything = {
        "src/main/java/com/acme/model/User.java",
        "src/main/java/com/acme/model/Order.java",
    }
    assert resolve(JAVA, main, "com.acme.model.*") == everything
    assert resolve(JAVA, main, "com.acme.model") == everything  # how symbols writes `.*`


# C and C++


C = [
    "src/net/conn.c",
    "src/net/conn.h",
    "include/conn.h",
    "src/util/log.h",
    "include/api.hpp",
    "src/common/defs.h",
    "vendor/common/defs.h",
]


def test_c_include_prefers_same_directory_then_any_suffix() -> None:
    found = resolve(C, "src/net/conn.c", "conn.h", "util/log.h", "api.hpp", "stdio.h")
    assert found == {"src/net/conn.h", "src/util/log.h", "include/api.hpp"}
    assert resolve(C, "include/api.hpp", "conn.h") == {"include/conn.h"}
    assert resolve(C, "src/net/conn.c", "../common/defs.h") == {"src/common/defs.h"}


def test_c_system_includes_only_match_project_paths() -> None:
    paths = [*C, "src/string.h"]
    assert resolve(paths, "src/net/conn.c", "<string.h>", "<conn.h>") == set()
    assert resolve(paths, "src/net/conn.c", "<util/log.h>") == {"src/util/log.h"}


def test_unknown_languages_and_self_imports_give_nothing() -> None:
    found = resolve_imports(["README.md", "a.py"], {"README.md": ["a"], "a.py": ["a"]})
    assert found == {"README.md": frozenset(), "a.py": frozenset()}


# The graph


def test_import_and_reference_edges_sum() -> None:
    symbols = {
        "a.py": defines("Alpha", refs=("Widget", "Gadget"), imports=("b",)),
        "b.py": defines("Widget"),
        "c.py": defines("Gadget"),
        "d.py": defines("Gadget"),
    }
    graph = build_graph(symbols, ["a.py", "b.py", "c.py", "d.py"])
    assert edges(graph) == {
        ("a.py", "b.py"): 2.0,  # the import and the reference
        ("a.py", "c.py"): 0.5,  # Gadget is defined twice
        ("a.py", "d.py"): 0.5,
    }


def test_common_and_short_names_link_nothing() -> None:
    common = {f"m{i}.py": defines("Handler") for i in range(6)}
    symbols = {
        **common,
        "user.py": defines("Main", refs=("Handler", "run", "Main")),
        "runner.py": defines("run"),
    }
    graph = build_graph(symbols, list(symbols))
    assert edges(graph) == {}  # six definers is too many, `run` too short, `Main` is its own


def test_builtin_and_builtin_method_names_link_nothing() -> None:
    symbols = {
        "store.py": defines("list", "update", "items", "snapshot"),
        "user.py": defines(refs=("list", "update", "items", "snapshot")),
    }
    graph = build_graph(symbols, list(symbols))
    assert edges(graph) == {("user.py", "store.py"): 1.0}  # only `snapshot` says anything


def test_five_definers_is_still_a_link() -> None:
    symbols = {f"m{i}.py": defines("Handler") for i in range(5)}
    symbols["user.py"] = defines(refs=("Handler",))
    graph = build_graph(symbols, list(symbols))
    assert edges(graph) == {("user.py", f"m{i}.py"): pytest.approx(0.2) for i in range(5)}


def test_paths_without_symbols_are_nodes_and_unknown_files_are_not() -> None:
    symbols = {"a.py": defines(imports=("b",)), "ghost.py": defines(imports=("a",))}
    graph = build_graph(symbols, ["a.py", "b.py", "a.py"])
    assert graph.paths == ("a.py", "b.py")
    assert edges(graph) == {("a.py", "b.py"): 1.0}


def test_file_graph_checks_its_arrays_and_freezes_them() -> None:
    with pytest.raises(ValueError):
        FileGraph(paths=("a",), src=np.array([0]), dst=np.array([1]), weight=np.array([1.0]))
    with pytest.raises(ValueError):
        FileGraph(paths=("a", "b"), src=np.array([0, 1]), dst=np.array([1]), weight=np.ones(1))
    with pytest.raises(ValueError):
        FileGraph(paths=("a", "b"), src=np.array([0]), dst=np.array([1]), weight=np.array([-1.0]))
    graph = FileGraph(paths=("a", "b"), src=np.array([0]), dst=np.array([1]), weight=np.ones(1))
    with pytest.raises(ValueError):
        graph.weight[0] = 5.0


# PageRank


def chain() -> FileGraph:
    """a -> b -> c, d -> a, e alone."""
    symbols = {
        "a.py": defines(imports=("b",)),
        "b.py": defines(imports=("c",)),
        "d.py": defines(imports=("a",)),
    }
    return build_graph(symbols, ["a.py", "b.py", "c.py", "d.py", "e.py"])


def test_pagerank_sums_to_one_and_follows_edges() -> None:
    rank = personalized_pagerank(chain(), {})
    assert sum(rank.values()) == pytest.approx(1.0)
    assert rank["c.py"] > rank["b.py"] > rank["a.py"] > rank["d.py"]
    assert rank["d.py"] == pytest.approx(rank["e.py"])


def test_seeds_gain_mass_and_pass_it_downstream() -> None:
    plain = personalized_pagerank(chain(), {})
    seeded = personalized_pagerank(chain(), {"d.py": 1.0})
    assert sum(seeded.values()) == pytest.approx(1.0)
    assert seeded["d.py"] > plain["d.py"]
    assert seeded["a.py"] > seeded["e.py"]
    assert seeded["e.py"] == pytest.approx(0.0)  # nothing links there and walks restart at d


def test_seed_weights_split_the_restarts() -> None:
    graph = build_graph({}, ["a.py", "b.py", "c.py"])
    rank = personalized_pagerank(graph, {"a.py": 3.0, "b.py": 1.0})
    assert rank == pytest.approx({"a.py": 0.75, "b.py": 0.25, "c.py": 0.0})


def test_graph_without_edges_is_uniform() -> None:
    graph = build_graph({}, ["a.py", "b.py", "c.py", "d.py"])
    assert personalized_pagerank(graph, {}) == pytest.approx(dict.fromkeys(graph.paths, 0.25))


def test_unknown_or_non_positive_seeds_count_as_none() -> None:
    plain = personalized_pagerank(chain(), {})
    assert personalized_pagerank(chain(), {"nowhere.py": 1.0, "a.py": 0.0}) == pytest.approx(plain)


def test_pagerank_on_an_empty_graph() -> None:
    assert personalized_pagerank(build_graph({}, []), {"a.py": 1.0}) == {}


def test_pagerank_matches_a_dense_solve() -> None:
    rng = np.random.default_rng(7)
    n = 40
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    weight = rng.random(200)
    paths = tuple(f"f{i}.py" for i in range(n))
    graph = FileGraph(paths=paths, src=src, dst=dst, weight=weight)
    p = np.zeros(n)
    p[[3, 9]] = [2.0, 1.0]
    p /= p.sum()
    m = np.zeros((n, n))
    np.add.at(m, (src, dst), weight)
    out = m.sum(axis=1)
    transition = np.where(out[:, None] > 0, m / np.where(out > 0, out, 1)[:, None], p[None, :])
    exact = np.linalg.solve(np.eye(n) - 0.85 * transition.T, 0.15 * p)
    rank = personalized_pagerank(graph, {"f3.py": 2.0, "f9.py": 1.0}, iterations=200, tol=1e-14)
    assert np.allclose([rank[x] for x in paths], exact / exact.sum(), atol=1e-9)


def test_neighbours_both_ways_strongest_first() -> None:
    symbols = {
        "a.py": defines("Alpha", refs=("Gadget",), imports=("b",)),
        "b.py": defines("Widget", refs=("Alpha",)),
        "c.py": defines("Gadget", imports=("a",)),
        "d.py": defines("Gadget"),
        "e.py": defines(),
    }
    graph = build_graph(symbols, list(symbols))
    # b: import out (1) + reference in (1); c: import in (1) + reference out (0.5); d: 0.5
    assert neighbours(graph, "a.py") == ("b.py", "c.py", "d.py")
    assert neighbours(graph, "e.py") == ()
    assert neighbours(graph, "missing.py") == ()
