"""The repository as a weighted graph of files, and where attention flows through it.

Edges come from imports that resolve to files in the repository and from references to names
that only a few files define. Personalized PageRank over that graph, seeded with the files a
task mentions, ranks the rest of the repository by how closely it is tied to them.
"""

from __future__ import annotations

import builtins
import posixpath
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kestrel.context.model import FileSymbols

MIN_NAME_LENGTH = 4
"""Shorter names (`get`, `run`, `id`) are too common to say two files belong together."""

MAX_DEFINERS = 5
"""A name defined in more files than this (`__init__`, `name`, `close`) links nothing."""

_OTHER_COMMON = "push then catch finally forEach length slice splice concat toString unwrap clone"
COMMON_NAMES = frozenset(
    {n for holder in (builtins, str, bytes, list, dict, set, int, float) for n in dir(holder)}
    | set(_OTHER_COMMON.split())
)
"""Builtins and methods of builtin types (`list`, `update`, `items`): a file that calls
`d.update()` is not using the one class in the repository that defines `update`."""

_PY = (".py", ".pyi")
_JS = (".js", ".ts", ".tsx", ".jsx", ".mjs", ".cjs", ".mts", ".cts")
_JS_TRY = ("", ".js", ".ts", ".tsx", ".jsx", ".mjs")
_JS_TO_TS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",)}
_C = (".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".inc", ".ipp")
_JAVA = (".java", ".kt")
_RUST_ROOTS = ("lib.rs", "main.rs")
_SOURCE_ROOTS = ("src", "lib")
_GO_STD_WORDS = (
    "archive bufio bytes cmp compress container context crypto database debug embed encoding "
    "errors expvar flag fmt go hash html image index internal io iter log maps math mime net os "
    "path plugin reflect regexp runtime slices sort strconv strings sync syscall testing text "
    "time unicode unique unsafe weak"
)
_GO_STD = frozenset(_GO_STD_WORDS.split())

IntArray = npt.NDArray[np.intp]
"""Node indices, one per edge."""
FloatArray = npt.NDArray[np.float64]
"""Edge weights or per-node scores."""


def _ext(path: str) -> str:
    dot = path.rfind(".")
    return path[dot:] if dot > path.rfind("/") else ""


def _join(base: str, rest: str) -> str:
    return f"{base}/{rest}" if base else rest


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _relative(directory: str, spec: str) -> str | None:
    """`spec` (`./x`, `../x/y`) taken from `directory`; None when it climbs out of the repo."""
    parts = directory.split("/") if directory else []
    for part in spec.split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/".join(parts)


def _suffixes(path: str) -> Iterable[str]:
    """`a/b/c` gives `c`, `b/c`, `a/b/c`: every tail a longer path could be matched by."""
    end = len(path)
    while end > 0:
        end = path.rfind("/", 0, end)
        yield path[end + 1 :]


def _closest(directory: str, candidates: Sequence[str]) -> str:
    """Of several files an import could mean, the one nearest the importer's folder."""
    if len(candidates) == 1:
        return candidates[0]
    here = directory + "/"
    return max(candidates, key=lambda c: len(posixpath.commonprefix([here, c])))


@dataclass(frozen=True, slots=True)
class _Index:
    """Lookup tables built once per repository so each import costs a few dict probes."""

    files: frozenset[str]
    packages: frozenset[str]
    py_modules: dict[str, list[str]]
    go_dirs: dict[str, list[str]]
    go_files: dict[str, tuple[str, ...]]
    by_suffix: dict[str, list[str]]
    java_dirs: dict[str, list[str]]
    java_files: dict[str, tuple[str, ...]]


def _python_roots(py_files: Sequence[str], packages: frozenset[str]) -> set[str]:
    """The repository root, `src/` and `lib/`, and every folder that holds a top-level package."""
    roots = {""}
    for path in py_files:
        top = path.partition("/")[0]
        if top in _SOURCE_ROOTS and "/" in path:
            roots.add(top)
    for package in packages:
        parent = _parent(package)
        if parent not in packages:
            roots.add(parent)
    return roots


def _module_names(path: str, roots: set[str]) -> Iterable[str]:
    stem = path[: path.rfind(".")]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    elif stem == "__init__":
        return
    directory = _parent(path)
    while True:
        if directory in roots:
            rel = stem[len(directory) + 1 :] if directory else stem
            if rel:
                yield rel.replace("/", ".")
        if not directory:
            return
        directory = _parent(directory)


def _build_index(paths: Collection[str]) -> _Index:
    files = frozenset(paths)
    py_files = sorted(p for p in files if _ext(p) in _PY)
    packages = frozenset(_parent(p) for p in py_files if p.endswith("/__init__.py"))
    roots = _python_roots(py_files, packages)
    py_modules: dict[str, list[str]] = defaultdict(list)
    for path in py_files:
        for name in _module_names(path, roots):
            py_modules[name].append(path)

    go_by_dir: dict[str, list[str]] = defaultdict(list)
    by_suffix: dict[str, list[str]] = defaultdict(list)
    java_by_dir: dict[str, list[str]] = defaultdict(list)
    for path in sorted(files):
        ext = _ext(path)
        if ext == ".go" and not path.endswith("_test.go"):
            go_by_dir[_parent(path)].append(path)
        elif ext in _C or ext in _JAVA:
            for tail in _suffixes(path):
                by_suffix[tail].append(path)
            if ext in _JAVA:
                java_by_dir[_parent(path)].append(path)
    return _Index(
        files=files,
        packages=packages,
        py_modules=dict(py_modules),
        go_dirs=_tails(go_by_dir),
        go_files={d: tuple(fs) for d, fs in go_by_dir.items()},
        by_suffix=dict(by_suffix),
        java_dirs=_tails(java_by_dir),
        java_files={d: tuple(fs) for d, fs in java_by_dir.items()},
    )


def _tails(directories: Iterable[str]) -> dict[str, list[str]]:
    """Each folder under every tail of its path, so `github.com/x/y/pkg` can find `pkg/`."""
    found: dict[str, list[str]] = defaultdict(list)
    for directory in directories:
        for tail in _suffixes(directory):
            found[tail].append(directory)
    return dict(found)


def _py_file(index: _Index, base: str) -> str | None:
    for candidate in (base + ".py", base + ".pyi", base + "/__init__.py"):
        if candidate in index.files:
            return candidate
    return None


def _python(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    directory = _parent(importer)
    if spec.startswith("."):
        rest = spec.lstrip(".")
        base = directory
        for _ in range(len(spec) - len(rest) - 1):
            if not base:
                return ()
            base = _parent(base)
        return _python_at(index, base, rest)
    # `from a.b import C` arrives as `a.b.C` too: when C is not a module, `a.b` is meant.
    for name in (spec, spec.rpartition(".")[0]):
        found = index.py_modules.get(name)
        if found:
            return (_closest(directory, found),)
    # A script beside its helpers imports them by bare name (its folder is on sys.path).
    if directory not in index.packages:
        return _python_at(index, directory, spec)
    return ()


def _python_at(index: _Index, base: str, dotted: str) -> tuple[str, ...]:
    if not dotted:
        found = _py_file(index, _join(base, "__init__"))
        return (found,) if found else ()
    rel = dotted.replace(".", "/")
    for candidate in (rel, rel.rpartition("/")[0]):
        if candidate:
            found = _py_file(index, _join(base, candidate))
            if found:
                return (found,)
    return ()


def _javascript(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    if not spec.startswith(("./", "../")) and spec not in (".", ".."):
        return ()  # a package from node_modules, or an alias we cannot see
    base = _relative(_parent(importer), spec)
    if base is None:
        return ()
    candidates = [base + ext for ext in _JS_TRY if base]
    candidates += [_join(base, "index" + ext) for ext in _JS_TRY[1:]]
    # TypeScript's ESM style names the compiled `.js` file while the repository holds `.ts`.
    ext = _ext(base)
    candidates += [base[: -len(ext)] + ts for ts in _JS_TO_TS.get(ext, ())]
    return next(((c,) for c in candidates if c in index.files), ())


def _go(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    parts = spec.split("/")
    # The standard library (`fmt`, `net/http`) must not land on a folder called `http`.
    if "." not in parts[0] and (len(parts) == 1 or parts[0] in _GO_STD):
        return ()
    for start in range(len(parts)):
        dirs = index.go_dirs.get("/".join(parts[start:]))
        if dirs:
            return index.go_files[_closest(_parent(importer), dirs)]
    return ()


def _rust_children(path: str) -> str:
    """The folder holding a Rust module's submodules: beside `mod.rs`, in `foo/` for `foo.rs`."""
    directory, _, name = path.rpartition("/")
    stem = name[: -len(".rs")]
    return directory if stem in ("mod", "lib", "main") else _join(directory, stem)


def _rust_module_file(index: _Index, directory: str) -> str | None:
    candidates = [_join(directory, root) for root in _RUST_ROOTS]
    candidates += [directory + ".rs", _join(directory, "mod.rs")] if directory else []
    return next((c for c in candidates if c in index.files), None)


def _rust_crate(index: _Index, importer: str) -> str | None:
    """The nearest folder above `importer` that holds a `lib.rs` or `main.rs`."""
    base = _parent(importer)
    while not any(_join(base, root) in index.files for root in _RUST_ROOTS):
        if not base:
            return None
        base = _parent(base)
    return base


def _rust(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    if spec.startswith("mod:"):
        name = spec[len("mod:") :]
        for base in (_rust_children(importer), _parent(importer)):
            for candidate in (_join(base, name + ".rs"), _join(base, name + "/mod.rs")):
                if candidate in index.files:
                    return (candidate,)
        return ()
    segments = spec.split("::")
    if segments[0] == "crate":
        root = _rust_crate(index, importer)
        if root is None:
            return ()
        base, segments = root, segments[1:]
    elif segments[0] in ("self", "super"):
        base = _rust_children(importer)
        while segments and segments[0] in ("self", "super"):
            if segments.pop(0) == "super":
                base = _parent(base)
    else:
        return ()  # another crate: std, a dependency or a sibling in the workspace
    names = [s for s in segments if s.isidentifier()]
    for stop in range(len(names), 0, -1):
        rel = _join(base, "/".join(names[:stop]))
        for candidate in (rel + ".rs", rel + "/mod.rs"):
            if candidate in index.files:
                return (candidate,)
    found = _rust_module_file(index, base)
    return (found,) if found else ()


def _java(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    directory = _parent(importer)
    parts = spec.removeprefix("static ").removesuffix(".*").split(".")
    # Static imports and nested classes name members past the file: drop them one at a time.
    for stop in range(len(parts), 1, -1):
        rel = "/".join(parts[:stop])
        for ext in _JAVA:
            found = index.by_suffix.get(rel + ext)
            if found:
                return (_closest(directory, found),)
    # `import a.b.*` (given as `a.b` or `a.b.*`) brings in the whole package.
    dirs = index.java_dirs.get("/".join(parts))
    return index.java_files[_closest(directory, dirs)] if dirs else ()


def _c(index: _Index, importer: str, spec: str) -> tuple[str, ...]:
    name = spec.strip().strip('"')
    directory = _parent(importer)
    if name.startswith("<"):
        # A system include: only a project path (`<proj/x.h>`), never `<stdio.h>`, is ours.
        name = name.strip("<>")
        if "/" not in name:
            return ()
    else:
        beside = _relative(directory, name)
        if beside in index.files:
            return (beside,)
    found = index.by_suffix.get(posixpath.normpath(name))
    return (_closest(directory, found),) if found else ()


_Resolver = Callable[[_Index, str, str], tuple[str, ...]]
_RESOLVERS: dict[str, _Resolver] = {
    **dict.fromkeys(_PY, _python),
    **dict.fromkeys(_JS, _javascript),
    ".go": _go,
    ".rs": _rust,
    **dict.fromkeys(_JAVA, _java),
    **dict.fromkeys(_C, _c),
}


def resolve_imports(
    paths: Collection[str], imports: Mapping[str, Sequence[str]]
) -> dict[str, frozenset[str]]:
    """For each importing file, the repository files its import strings resolve to."""
    index = _build_index(paths)
    # Files in one folder import the same things (`typing`, `./utils`, `fmt`); every resolver
    # but Rust's depends only on the importer's folder, so answers are shared across it.
    caches: dict[tuple[_Resolver, str], dict[str, tuple[str, ...]]] = {}
    resolved: dict[str, frozenset[str]] = {}
    for importer, specs in imports.items():
        resolver = _RESOLVERS.get(_ext(importer))
        if resolver is None:
            resolved[importer] = frozenset()
            continue
        cache = caches.setdefault(
            (resolver, importer if resolver is _rust else _parent(importer)), {}
        )
        targets: set[str] = set()
        for spec in specs:
            found = cache.get(spec)
            if found is None:
                found = cache[spec] = resolver(index, importer, spec) if spec else ()
            targets.update(found)
        targets.discard(importer)
        resolved[importer] = frozenset(targets)
    return resolved


@dataclass(frozen=True, slots=True, eq=False)
class FileGraph:
    """Files as nodes and summed, weighted, directed edges `src[k] -> dst[k]` of `weight[k]`."""

    paths: tuple[str, ...]
    src: IntArray
    dst: IntArray
    weight: FloatArray
    _index: dict[str, int] = field(init=False, repr=False)
    _pull: tuple[IntArray, FloatArray, IntArray, IntArray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        src = np.asarray(self.src, dtype=np.intp)
        dst = np.asarray(self.dst, dtype=np.intp)
        weight = np.asarray(self.weight, dtype=np.float64)
        n = len(self.paths)
        if not src.shape == dst.shape == weight.shape or src.ndim != 1:
            raise ValueError("src, dst and weight must be 1-d arrays of one length")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError("edge endpoints must index into paths")
        if weight.size and not weight.min() >= 0:
            raise ValueError("edge weights must be non-negative numbers")
        for name, value in (("src", src), ("dst", dst), ("weight", weight)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_index", {p: i for i, p in enumerate(self.paths)})
        object.__setattr__(self, "_pull", _pull(n, src, dst, weight))


def _pull(
    n: int, src: IntArray, dst: IntArray, weight: FloatArray
) -> tuple[IntArray, FloatArray, IntArray, IntArray]:
    """Edges grouped by target, each with its share of its source's out-weight.

    Worked out once per graph so that a PageRank step is a gather, a multiply and a segmented
    sum; grouping by target lets `np.add.reduceat` sum in order, faster than `np.bincount`.
    """
    out = np.bincount(src, weights=weight, minlength=n)[src]
    share = np.divide(weight, out, out=np.zeros_like(weight), where=out > 0)
    order = np.argsort(dst * n + src)
    targets = dst[order]
    starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]]) if targets.size else targets
    return src[order], share[order], starts, targets[starts]


def _summed(paths: tuple[str, ...], src: list[int], dst: list[int], w: list[float]) -> FileGraph:
    n = len(paths)
    if not src:
        empty = np.zeros(0, dtype=np.intp)
        return FileGraph(paths=paths, src=empty, dst=empty, weight=np.zeros(0))
    pairs = np.asarray(src, dtype=np.intp) * n + np.asarray(dst, dtype=np.intp)
    keys, slot = np.unique(pairs, return_inverse=True)
    weight = np.bincount(slot, weights=np.asarray(w)).astype(np.float64)
    return FileGraph(paths=paths, src=keys // n, dst=keys % n, weight=weight)


def build_graph(symbols: Mapping[str, FileSymbols], paths: Sequence[str]) -> FileGraph:
    """Files linked by imports (weight 1) and by references to a name k files define (1/k each)."""
    nodes = tuple(dict.fromkeys(paths))
    index = {p: i for i, p in enumerate(nodes)}
    known = {p: s for p, s in symbols.items() if p in index}
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []
    resolved = resolve_imports(nodes, {p: s.imports for p, s in known.items()})
    for importer, targets in resolved.items():
        for target in targets:
            src.append(index[importer])
            dst.append(index[target])
            weight.append(1.0)
    definers: dict[str, set[int]] = defaultdict(set)
    for path, found in known.items():
        for symbol in found.definitions:
            if len(symbol.name) >= MIN_NAME_LENGTH and symbol.name not in COMMON_NAMES:
                definers[symbol.name].add(index[path])
    links = {n: (tuple(w), 1.0 / len(w)) for n, w in definers.items() if len(w) <= MAX_DEFINERS}
    for path, found in known.items():
        i = index[path]
        for name in links.keys() & set(found.references):
            where, share = links[name]
            for j in where:
                if j != i:
                    src.append(i)
                    dst.append(j)
                    weight.append(share)
    return _summed(nodes, src, dst, weight)


def _teleport(graph: FileGraph, seeds: Mapping[str, float]) -> FloatArray:
    n = len(graph.paths)
    p = np.zeros(n)
    for path, w in seeds.items():
        i = graph._index.get(path)
        if i is not None and w > 0:
            p[i] += w
    total = p.sum()
    return p / total if total > 0 else np.full(n, 1.0 / n)


def personalized_pagerank(
    graph: FileGraph,
    seeds: Mapping[str, float],
    damping: float = 0.85,
    iterations: int = 40,
    tol: float = 1e-8,
) -> dict[str, float]:
    """Each file's PageRank when walks restart at the seeds (all files alike when none is known).

    Iteration stops once the summed change over all files is under `tol` per file, the test
    networkx uses; ranks are then good to a few parts in ten thousand, far finer than any cut.
    """
    n = len(graph.paths)
    if n == 0:
        return {}
    p = _teleport(graph, seeds)
    rank = p
    src, share, starts, targets = graph._pull
    carried = np.empty_like(share)
    flow = np.zeros(n)
    for _ in range(iterations):
        if starts.size:
            # `clip` skips per-element bounds checks: FileGraph has already checked every index.
            np.take(rank, src, out=carried, mode="clip")
            np.multiply(carried, share, out=carried)
            flow[targets] = np.add.reduceat(carried, starts)
        # What reached files with no way out is what `flow` lost; it restarts at the seeds.
        restart = damping * (1.0 - flow.sum()) + (1.0 - damping)
        new = damping * flow + restart * p
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < n * tol:
            break
    rank = rank / rank.sum()
    return dict(zip(graph.paths, rank.tolist(), strict=True))


def neighbours(graph: FileGraph, path: str) -> tuple[str, ...]:
    """Files linked to `path` by an edge either way, the most strongly linked first."""
    i = graph._index.get(path)
    if i is None:
        return ()
    outgoing = graph.src == i
    incoming = graph.dst == i
    others = np.concatenate([graph.dst[outgoing], graph.src[incoming]])
    weights = np.concatenate([graph.weight[outgoing], graph.weight[incoming]])
    strength: dict[int, float] = defaultdict(float)
    for j, w in zip(others.tolist(), weights.tolist(), strict=True):
        if j != i:
            strength[j] += w
    order = sorted(strength, key=lambda j: (-strength[j], graph.paths[j]))
    return tuple(graph.paths[j] for j in order)
