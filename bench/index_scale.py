"""Index-scale benchmark: the context engine and `grep` on a tree of large real repositories.

    python bench/index_scale.py [REPO.git ...] [--mirrors DIR] [--work DIR] [--target-files N]
                                [--ages YEARS,...] [--skip-build]
                                [--only cold,update,query,grep] [--runs N]
                                [--grep-runs N] [--json OUT]

1. Build (once; reused while the sources and `--target-files` are unchanged) a big tree under
   `--work`, outside this project: the HEAD of each bare repository given (default: every
   `*/repo` and `*.git` under `--mirrors`) is exported into `combined/<name>/` blob by blob with
   `git ls-tree` + `git cat-file --batch`, leaving out the files whose blobs the mirror lacks.
   (Not `git archive`: it obeys the repositories' `export-ignore`, which drops about 230
   scikit-learn files, and re-encodes sphinx's `working-tree-encoding` files.) While the tree
   holds fewer than `--target-files` files, an older django is added as `combined/django-old/`:
   the newest commit on the mirror's first-parent line that is at least 8 years older than HEAD.
   With `--ages 2,4,...` every repository is added instead at each of those ages in turn
   (`<name>-<age>y/`, `bench/scale_snapshots.py`) until the tree holds `--target-files`: the
   monorepo-scale run (`--target-files 250000`).
   The tree is `git init`ed and committed on `main`, with a branch `bench-1000` that appends a
   comment line to 1,000 `.py` files. Per-repository sizes are printed.
2. Cold index, each in a fresh subprocess with an empty cache directory so that peak memory is the
   engine's alone: `ContextEngine.open` + `refresh()` over the whole tree and over django alone
   (`combined/django`, a subdirectory of the checkout; the largest repository if there is no
   django). Prints wall time, files total/ranked, peak RSS (`ru_maxrss` in the child, and the
   largest of its own children: git and the worker processes that read files), CPU time and
   the size of the index on disk, and for a tree of at least `LIGHTEN_MIN_FILES` files the
   RSS once the engine serves from the snapshot it wrote. `KESTREL_INDEX_WORKERS` sets the
   workers (0: none).
3. Warm engine, in-process, reopening the persisted index (load time printed): one `.py` file
   changed, then `refresh_paths([it])`, and changed again, then a full `refresh()` (`--runs`
   times each, p50/p95); `refresh()` with nothing changed; `refresh()` after `git checkout` of
   `bench-1000` (1,000 files change) and after checking `main` out again; then `bench-1000`
   once more with `refresh(wait=False)`, as the code tools refresh: how soon it returns,
   `search()` latency while the files are read in the background, and when the read ends.
4. Query latency: `search()` over the 60 `problem_statement`s of the localization dev split and
   over short keyword queries, each timed after one warm-up call of the same query.
5. grep: the `Grep` tool run in-process against raw `rg -n` (same walk flags, same pattern) and
   against ripgrep with exactly the flags the tool spawns it with (`GREP_OUTPUT_FLAGS`), 20
   patterns, the median of `--grep-runs` runs per pattern (in turn tool first and tool last),
   then p50/p95 over the patterns.

The semantic layer (chunk embeddings) is off by default; `KESTREL_EMBEDDER=static` measures with
it.

Goals: a django-sized cold index under 30 s on 2 cores with peak memory under 1 GB; the grep tool's
p95 under 1.2 x raw ripgrep's. Timings depend on the machine: note its cores and load with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

from scale_snapshots import older_snapshots

from kestrel.context.embed import default_embedder
from kestrel.context.engine import LIGHTEN_MIN_FILES, ContextEngine
from kestrel.context.index_store import index_path_for
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools import Grep, PlannedWrite, ToolContext
from kestrel.tools.grep_output import GREP_OUTPUT_FLAGS
from kestrel.tools.search import GrepArgs, find_rg

REPO = Path(__file__).resolve().parent.parent
QUERIES = REPO.parent / "shared" / "bench" / "localization" / "lite_dev.jsonl"
PHASES = ("cold", "update", "query", "grep")
BRANCH = "bench-1000"
CHECKOUT_FILES = 1000
LAYOUT = 2
"""Bumped when the way the tree is built changes, so that older builds are rebuilt."""
KEYWORDS = (
    "QuerySet", "migration autodetector", "ForeignKey on_delete", "ModelAdmin", "template filter",
    "timezone", "lambdify", "latex printer", "simplify trigonometric", "sparse matrix",
    "linalg solve", "integrate quad", "fft", "colorbar extend", "legend handles",
    "LogisticRegression", "cross validation", "FITS header", "WCS", "unit conversion",
    "autodoc typehints", "fixture scope", "parametrize ids", "assert rewrite", "session cookie",
    "HTTPAdapter retries", "blueprint url_prefix", "json encoder", "redirect", "pickle",
)  # fmt: skip
PATTERNS = (
    "def __init__", "TODO", "import numpy as np", "raise ValueError", "self.assertEqual",
    "return None", "@property", "FIXME", "deprecated", "from __future__ import annotations",
    "QuerySet", "lambdify", "get_current_site", "HTTPAdapter", "assert_allclose",
    r"class \w+Error", r"def test_\w+\(", r"\bnp\.(zeros|ones)\(", r"^\s*async def",
    r"[A-Z_]{12,}\s*=",
)  # fmt: skip
RG_WALK = ("--no-config", "--hidden", "--no-require-git", "--glob", "!.git")
"""The walk flags the grep tool passes, so both sides search the same files."""
GIT_QUIET = (
    "-c", "user.name=kestrel-bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0",
    "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null",
)  # fmt: skip


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git, failing loudly."""
    done = subprocess.run(["git", *GIT_QUIET, *args], cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        raise SystemExit(f"git {' '.join(args[:4])} failed: {err}")
    return done.stdout.decode("utf-8", errors="surrogateescape")


def stats(samples: Iterable[float]) -> dict[str, float]:
    """p50, p95 and max of `samples`."""
    ordered = sorted(samples)
    if not ordered:
        return {"p50": float("nan"), "p95": float("nan"), "max": float("nan"), "n": 0}
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1], "n": len(ordered)}


def timed(action: Callable[[], object]) -> tuple[float, Any]:
    """Seconds one call of `action` took, and what it returned."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def ms(figure: dict[str, float]) -> str:
    """'p50 X ms  p95 Y ms' for figures in seconds."""
    return f"p50 {figure['p50'] * 1000:8.1f} ms  p95 {figure['p95'] * 1000:8.1f} ms"


# ------------------------------------------------------------------------------------ build


def find_sources(given: list[Path], mirrors: Path) -> list[tuple[str, Path]]:
    """(name in the tree, bare repository) for each repository to export."""
    if not given:
        if not mirrors.is_dir():
            raise SystemExit(
                f"--mirrors {mirrors} is not a directory: point it at a folder of bare clones "
                "(owner+name/repo or name.git), or name bare repositories as arguments"
            )
        given = sorted([*mirrors.glob("*/repo"), *mirrors.glob("*.git")])
        if not given:
            raise SystemExit(f"no bare repositories (*/repo or *.git) under {mirrors}")
    sources: list[tuple[str, Path]] = []
    for bare in given:
        if not (bare / "HEAD").is_file() or not (bare / "objects").is_dir():
            raise SystemExit(f"{bare} is not a bare git repository (no HEAD or objects/)")
        raw = bare.parent.name if bare.name == "repo" else bare.name.removesuffix(".git")
        name = raw.rsplit("+", 1)[-1]
        if name in (n for n, _ in sources):
            name = raw.replace("+", "-")
        sources.append((name, bare.resolve()))
    return sources


def missing_shas(bare: Path, entries: list[tuple[str, str, str]]) -> set[str]:
    """Blob ids of `entries` (mode, sha, path) that the object store lacks."""
    query = "".join(f"{sha}\n" for _, sha, _ in entries).encode()
    done = subprocess.run(
        ["git", "--git-dir", str(bare), "cat-file", "--batch-check"],
        input=query,
        capture_output=True,
        check=True,
    )
    return {line.split()[0] for line in done.stdout.decode().splitlines() if "missing" in line}


def export(bare: Path, commit: str, dest: Path) -> int:
    """Write `commit`'s files into `dest`; returns how many blobs the mirror lacked."""
    dest.mkdir(parents=True)
    listing = git("--git-dir", str(bare), "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: list[tuple[str, str, str]] = []
    for item in filter(None, listing.split("\0")):
        meta, path = item.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            entries.append((mode, sha, path))
    missing = missing_shas(bare, entries)
    write_blobs(bare, [e for e in entries if e[1] not in missing], dest)
    return len(missing)


def write_blobs(bare: Path, entries: list[tuple[str, str, str]], dest: Path) -> None:
    """Write each (mode, sha, path) blob under `dest`, streamed from `git cat-file --batch`."""
    cat = subprocess.Popen(
        ["git", "--git-dir", str(bare), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert cat.stdin is not None and cat.stdout is not None
    # Feed ids from a thread: writing them all first would deadlock on a full output pipe.
    feeder = threading.Thread(target=_feed, args=(cat.stdin, [sha for _, sha, _ in entries]))
    feeder.start()
    for mode, _, path in entries:
        size = int(cat.stdout.readline().split()[2])
        body = cat.stdout.read(size)
        cat.stdout.read(1)
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(body.decode("utf-8", errors="surrogateescape"))
        else:
            target.write_bytes(body)
            if mode == "100755":
                target.chmod(0o755)
    feeder.join()
    if cat.wait() != 0:
        raise SystemExit(f"git cat-file --batch in {bare} failed")


def _feed(stream: IO[bytes], shas: list[str]) -> None:
    for sha in shas:
        stream.write(f"{sha}\n".encode())
    stream.close()


def old_commit(bare: Path, years: int = 8) -> str:
    """The newest first-parent commit at least `years` years older than HEAD."""
    head = datetime.fromtimestamp(
        int(git("--git-dir", str(bare), "log", "-1", "--format=%ct")), UTC
    )
    try:
        cutoff = head.replace(year=head.year - years)
    except ValueError:  # 29 February
        cutoff = head.replace(year=head.year - years, day=28)
    found = git(
        "--git-dir", str(bare), "rev-list", "-1", "--first-parent",
        f"--before={cutoff.isoformat()}", "HEAD",
    ).strip()  # fmt: skip
    if not found:
        raise SystemExit(f"{bare} has no commit {years} years older than HEAD")
    return found


def tree_sizes(root: Path) -> dict[str, int]:
    """Files, .py files and bytes under `root` (symlinks not followed)."""
    files = py = size = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            st = os.lstat(os.path.join(folder, name))
            files += 1
            py += name.endswith(".py")
            size += st.st_size
    return {"files": files, "py_files": py, "bytes": size}


def build(options: argparse.Namespace) -> dict[str, Any]:
    """The combined tree's manifest, building the tree first unless an up-to-date one exists."""
    combined, manifest_path = options.work / "combined", options.work / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else None
    built = manifest is not None and (combined / ".git").is_dir()
    if options.skip_build:
        if not built:
            raise SystemExit(f"--skip-build: no built tree under {options.work}; build it first")
        return manifest  # type: ignore[return-value]
    sources = find_sources(options.repos, options.mirrors)
    plan = [
        {
            "name": name,
            "bare": str(bare),
            "commit": git("--git-dir", str(bare), "rev-parse", "HEAD").strip(),
        }
        for name, bare in sources
    ]
    key = {
        "sources": plan,
        "target_files": options.target_files,
        "layout": LAYOUT,
        "ages": options.ages,
    }
    if built and manifest is not None and manifest["key"] == key:
        print(f"reusing the tree under {combined}")
        return manifest
    shutil.rmtree(combined, ignore_errors=True)
    manifest_path.unlink(missing_ok=True)
    started = time.perf_counter()
    repos = export_all(plan, combined, options.target_files, options.ages)
    print("committing the combined tree ...", flush=True)
    git("init", "--quiet", "--initial-branch=main", str(combined))
    # The repositories' .gitattributes must not convert line endings or encodings on add.
    (combined / ".git" / "info" / "attributes").write_text(
        "* -text !eol -filter -ident -working-tree-encoding\n"
    )
    git("add", "--all", "--force", ".", cwd=combined)
    git("commit", "--quiet", "--no-verify", "-m", "combined tree", cwd=combined)
    changed = make_branch(combined)
    for repo in repos:
        repo.update(tree_sizes(combined / repo["name"]))
    manifest = {
        "key": key,
        "repos": repos,
        "branch_changed_files": changed,
        "build_s": round(time.perf_counter() - started, 1),
    }
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def export_all(
    plan: list[dict[str, str]], combined: Path, target: int, ages: list[int]
) -> list[dict[str, Any]]:
    """Export each planned HEAD, then (while the tree has fewer than `target` files) older
    snapshots of every repository at the `ages` given, or else an old django."""
    repos: list[dict[str, Any]] = []
    for source in plan:
        print(f"exporting {source['name']} at {source['commit'][:10]} ...", flush=True)
        lacked = export(Path(source["bare"]), source["commit"], combined / source["name"])
        repos.append({**source, "missing_blobs": lacked})
    total = sum(tree_sizes(combined / r["name"])["files"] for r in repos)
    if ages:
        count = lambda root: tree_sizes(root)["files"]  # noqa: E731
        more = older_snapshots(
            plan, combined, total, target, ages, export=export, old_commit=old_commit, count=count
        )
        return [*repos, *more]
    django = next((r for r in repos if r["name"] == "django"), None)
    if total >= target:
        return repos
    if django is None:
        print(f"warning: {total} files < --target-files {target}, and no django to add")
        return repos
    commit = old_commit(Path(django["bare"]))
    print(f"{total} files < --target-files {target}: adding django-old at {commit[:10]} ...")
    lacked = export(Path(django["bare"]), commit, combined / "django-old")
    return [*repos, {**django, "name": "django-old", "commit": commit, "missing_blobs": lacked}]


def make_branch(combined: Path) -> int:
    """Commit a comment line appended to up to 1,000 .py files as branch `bench-1000`."""
    listed = [
        p
        for p in git("ls-files", "-z", "--", "*.py", cwd=combined).split("\0")
        if p and not (combined / p).is_symlink()
    ]
    step = max(1, len(listed) // CHECKOUT_FILES)
    chosen = listed[::step][:CHECKOUT_FILES]
    git("checkout", "--quiet", "-b", BRANCH, cwd=combined)
    for path in chosen:
        target = combined / path
        data = target.read_bytes()
        sep = b"" if data.endswith(b"\n") or not data else b"\n"
        target.write_bytes(data + sep + b"# kestrel index-scale bench: changed on bench-1000\n")
    git("commit", "--quiet", "--no-verify", "-a", "-m", "append a comment line", cwd=combined)
    git("checkout", "--quiet", "main", cwd=combined)
    return len(chosen)


def print_sizes(manifest: dict[str, Any]) -> None:
    """Per-repository sizes of the tree."""
    print(f"\n{'repository':<14} {'commit':<11} {'files':>7} {'.py':>6} {'MB':>7}  missing blobs")
    for r in manifest["repos"]:
        mb = r["bytes"] / 1e6
        print(
            f"{r['name']:<14} {r['commit'][:10]:<11} {r['files']:>7} {r['py_files']:>6} "
            f"{mb:>7.1f}  {r['missing_blobs']}"
        )
    files = sum(r["files"] for r in manifest["repos"])
    mb = sum(r["bytes"] for r in manifest["repos"]) / 1e6
    print(f"{'total':<26} {files:>7} {'':>6} {mb:>7.1f}")


# ------------------------------------------------------------------------------------- cold


def cold_child(root: Path, cache: Path) -> None:
    """In the child: open the engine on an empty cache, refresh, print figures as JSON."""
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    last = [time.perf_counter()]

    def progress(done: int, todo: int) -> None:
        if time.perf_counter() - last[0] > 10 or done == todo:
            last[0] = time.perf_counter()
            print(f"  ... {done}/{todo} files", file=sys.stderr, flush=True)

    # The embedding model is distilled once per machine, in the user's cache, before timing.
    embedder = default_embedder()
    started = time.perf_counter()
    engine = ContextEngine.open(
        root,
        cache,
        embedder=embedder,
        ranker=default_ranker(),
        definition_ranker=default_definition_ranker(),
    )
    report = engine.refresh(progress)
    took = time.perf_counter() - started
    workers = engine.workers
    held_mb = None
    if report.files_total >= LIGHTEN_MIN_FILES:
        # A big index serves from its snapshot once it is written: what the session then holds.
        deadline = time.perf_counter() + 600
        while not engine.lightened and time.perf_counter() < deadline:
            time.sleep(0.1)
        held_mb = resident_mb() if engine.lightened else None
    engine.close()
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    index = index_path_for(root, cache).parent
    figures = {
        "wall_s": took,
        "refresh_s": report.took_s,
        "files_total": report.files_total,
        "files_ranked": report.files_ranked,
        "skipped": report.skipped,
        "workers": workers,
        "peak_rss_mb": me.ru_maxrss / 1024,
        "held_mb": held_mb,
        "import_rss_mb": base_kb / 1024,
        "children_peak_rss_mb": children.ru_maxrss / 1024,
        "cpu_s": me.ru_utime + me.ru_stime,
        "children_cpu_s": children.ru_utime + children.ru_stime,
        "index_mb": sum(p.stat().st_size for p in index.iterdir()) / 1e6,
    }
    print(json.dumps(figures))


def resident_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    with open("/proc/self/statm") as stat:
        return int(stat.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cold(root: Path, cache: Path) -> dict[str, Any]:
    """Cold index of `root` in a fresh subprocess, with `cache` emptied first."""
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cold-child", str(root), str(cache)]
    started = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the cold-index child for {root} failed (exit {done.returncode})")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["process_s"] = time.perf_counter() - started
    print(
        f"cold index {root.name:<10} {figures['wall_s']:7.1f} s  "
        f"(process {figures['process_s']:.1f} s)  {figures['files_total']} files, "
        f"{figures['files_ranked']} ranked  peak RSS {figures['peak_rss_mb']:.0f} MB "
        f"(after imports {figures['import_rss_mb']:.0f} MB; largest of git and "
        f"{figures['workers']} workers {figures['children_peak_rss_mb']:.0f} MB)  "
        f"CPU {figures['cpu_s']:.0f} s + {figures['children_cpu_s']:.0f} s in children  "
        f"index {figures['index_mb']:.1f} MB  skipped {figures['skipped']}",
        flush=True,
    )
    return figures


def focus_repo(manifest: dict[str, Any]) -> str:
    """django, else the repository with the most files."""
    names = {r["name"]: r["files"] for r in manifest["repos"] if r["name"] != "django-old"}
    return "django" if "django" in names else max(names, key=lambda n: names[n])


# ------------------------------------------------------------------------------------- warm


def open_warm(root: Path, cache: Path) -> tuple[ContextEngine, dict[str, Any]]:
    """Reopen the persisted index and bring it up to date; the load and refresh times."""
    existed = index_path_for(root, cache).is_file()
    embedder = default_embedder()
    load_s, engine = timed(
        lambda: ContextEngine.open(
            root,
            cache,
            embedder=embedder,
            ranker=default_ranker(),
            definition_ranker=default_definition_ranker(),
        )
    )
    first_s, report = timed(engine.refresh)
    nothing = [timed(engine.refresh)[0] for _ in range(5)]
    figures = {
        "index_existed": existed,
        "load_s": load_s,
        "first_refresh_s": first_s,
        "first_refresh_changed": report.added + report.changed + report.removed,
        "rss_mb": _rss_mb(),
        "refresh_nothing_changed": stats(nothing),
    }
    note = "" if existed else "  (no index in the cache: this was a cold build, in-process)"
    print(
        f"warm open: load {load_s:.2f} s, first refresh {first_s:.2f} s "
        f"({figures['first_refresh_changed']} changed), RSS {figures['rss_mb']:.0f} MB{note}"
    )
    print(f"refresh(), nothing changed        {ms(figures['refresh_nothing_changed'])}")
    return engine, figures


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pick_file(engine: ContextEngine, focus: str) -> str:
    """A ranked .py file of 10-60 KB, preferably in the focus repository."""
    candidates = [
        p
        for p in sorted(engine.paths)
        if p.endswith(".py")
        and (r := engine.record(p)) is not None
        and r.kind == "code"
        and 10_000 <= r.size <= 60_000
    ]
    preferred = [p for p in candidates if p.startswith(f"{focus}/")] or candidates
    if not preferred:
        raise SystemExit("no .py file of 10-60 KB to edit in the tree")
    return preferred[len(preferred) // 2]


def update(engine: ContextEngine, root: Path, focus: str, runs: int) -> dict[str, Any]:
    """One file changed (refresh_paths and refresh), then a 1,000-file checkout each way."""
    rel = pick_file(engine, focus)
    path = root / rel
    original = path.read_bytes()
    paths_s: list[float] = []
    full_s: list[float] = []
    missed = 0
    try:
        for i in range(runs):
            # One line, then two: consecutive writes always differ in size, so no change hides
            # behind a coarse mtime.
            line = f"# index-scale edit {i}\n".encode()
            path.write_bytes(original + line)
            took, changed = timed(lambda: engine.refresh_paths([rel]))
            paths_s.append(took)
            missed += changed != 1
            path.write_bytes(original + line + line)
            took, report = timed(engine.refresh)
            full_s.append(took)
            missed += report.changed != 1
    finally:
        path.write_bytes(original)
        engine.refresh_paths([rel])
    figures: dict[str, Any] = {
        "file": rel,
        "refresh_paths_1": stats(paths_s),
        "refresh_1": stats(full_s),
        "missed": missed,
    }
    print(f"1 file changed ({rel})")
    print(f"  refresh_paths([file])           {ms(figures['refresh_paths_1'])}")
    print(f"  refresh()                       {ms(figures['refresh_1'])}")
    if missed:
        print(f"  warning: {missed} updates did not report exactly one changed file")
    figures.update(checkout_figures(engine, root))
    return figures


def checkout_figures(engine: ContextEngine, root: Path) -> dict[str, Any]:
    """refresh() after checking out `bench-1000` and after checking `main` out again."""
    if (
        git("status", "--porcelain", cwd=root).strip()
        or git("rev-parse", "--abbrev-ref", "HEAD", cwd=root).strip() != "main"
    ):
        print("warning: the tree was not a clean `main`; checking it out by force")
        git("checkout", "--quiet", "--force", "main", cwd=root)
        engine.refresh()
    figures: dict[str, Any] = {}
    try:
        for branch in (BRANCH, "main"):
            checkout_s, _ = timed(lambda b=branch: git("checkout", "--quiet", b, cwd=root))
            took, report = timed(engine.refresh)
            changed = report.added + report.changed + report.removed
            figures[f"checkout_{branch}"] = {
                "git_checkout_s": checkout_s,
                "refresh_s": took,
                "changed": changed,
            }
            print(
                f"git checkout {branch:<10} {checkout_s:6.2f} s, then refresh() {took:7.2f} s "
                f"({changed} files changed)",
                flush=True,
            )
        figures["background"] = background_checkout(engine, root)
    finally:
        git("checkout", "--quiet", "--force", "main", cwd=root)
    engine.refresh()
    return figures


def background_checkout(engine: ContextEngine, root: Path) -> dict[str, Any]:
    """Check `bench-1000` out, `refresh(wait=False)`, and query while the files are read."""
    git("checkout", "--quiet", BRANCH, cwd=root)
    started = time.perf_counter()
    report = engine.refresh(wait=False)
    returned = time.perf_counter() - started
    during: list[float] = []
    pending: list[int] = []
    while engine.pending and len(during) < 10_000:
        query = KEYWORDS[len(during) % len(KEYWORDS)]
        took, result = timed(partial(engine.search, query, k=10))
        during.append(took)
        pending.append(result.pending)
        time.sleep(0.05)  # a session asks now and then, not in a tight loop
    engine.refresh()  # waits for the read to end
    done = time.perf_counter() - started
    figures: dict[str, Any] = {
        "returned_s": returned,
        "pending_at_start": report.pending,
        "read_s": done,
        "queries": len(during),
        "query_during": stats(during) if during else None,
        "pending_seen": [max(pending, default=0), min(pending, default=0)],
        "each_ms": [round(1000 * t, 1) for t in during],
    }
    line = (
        f"git checkout {BRANCH}, refresh(wait=False) returned in {returned:.2f} s "
        f"({report.pending} files pending), read in {done:.2f} s"
    )
    if during:
        line += f"; {len(during)} queries meanwhile {ms(figures['query_during'])}"
    print(line, flush=True)
    git("checkout", "--quiet", "main", cwd=root)
    engine.refresh()
    return figures


def queries(engine: ContextEngine) -> dict[str, Any]:
    """search() latency over the issue texts and the keyword queries."""
    if not QUERIES.is_file():
        raise SystemExit(f"{QUERIES} is missing: it holds the problem statements to query with")
    rows = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    sets = {"problem statements": [r["problem_statement"] for r in rows], "keywords": KEYWORDS}
    figures: dict[str, Any] = {}
    for label, texts in sets.items():
        took: list[float] = []
        for text in texts:
            engine.search(text, k=10)
            took.append(engine.search(text, k=10).took_ms / 1000)
        figures[label] = stats(took)
        print(f"search(), {len(texts):3} {label:<19}  {ms(figures[label])}")
    return figures


# ------------------------------------------------------------------------------------- grep


async def grep(root: Path, work: Path, runs: int) -> dict[str, Any]:
    """The grep tool against raw ripgrep, per pattern."""
    rg = find_rg()

    async def no_write(plan: PlannedWrite) -> None:
        return None

    ctx = ToolContext(
        root=root,
        executor=LocalExecutor(),
        artifacts_dir=work / "artifacts",
        on_output=lambda stream, text: None,
        before_write=no_write,
    )
    tool = Grep()

    async def via_tool(pattern: str) -> tuple[float, str]:
        started = time.perf_counter()
        outcome = await tool.run(GrepArgs(pattern=pattern), ctx)
        return time.perf_counter() - started, outcome.content.split("\n", 1)[0]

    def via_rg(pattern: str, *flags: str) -> tuple[float, int]:
        cmd = [rg, *flags, *RG_WALK, "--regexp", pattern]
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=root, capture_output=True, check=False)
        return time.perf_counter() - started, done.stdout.count(b"\n")

    rows: list[dict[str, Any]] = []
    print(f"\n{'pattern':<36} {'tool ms':>8} {'rg -n ms':>9} {'rg tool':>8} {'ratio':>6}  lines")
    for pattern in PATTERNS:
        await via_tool(pattern)  # warm the page cache and the tool's first call
        tool_s, plain_s, flags_s = [], [], []
        for run in range(runs):
            # Every other run the other way round, so that neither side always goes first.
            if run % 2:
                flags_s.append(via_rg(pattern, *GREP_OUTPUT_FLAGS)[0])
                took, lines = via_rg(pattern, "--line-number")
                plain_s.append(took)
            took, summary = await via_tool(pattern)
            tool_s.append(took)
            if not run % 2:
                took, lines = via_rg(pattern, "--line-number")
                plain_s.append(took)
                flags_s.append(via_rg(pattern, *GREP_OUTPUT_FLAGS)[0])
        row = {
            "pattern": pattern,
            "tool_s": statistics.median(tool_s),
            "rg_s": statistics.median(plain_s),
            "rg_tool_flags_s": statistics.median(flags_s),
            "rg_lines": lines,
            "tool_summary": summary,
        }
        rows.append(row)
        print(
            f"{pattern:<36} {row['tool_s'] * 1000:8.1f} {row['rg_s'] * 1000:9.1f} "
            f"{row['rg_tool_flags_s'] * 1000:8.1f} {row['tool_s'] / row['rg_s']:6.2f}  {lines}",
            flush=True,
        )
    figures: dict[str, Any] = {
        "tool": stats(r["tool_s"] for r in rows),
        "rg": stats(r["rg_s"] for r in rows),
        "rg_tool_flags": stats(r["rg_tool_flags_s"] for r in rows),
        "patterns": rows,
    }
    figures["p95_ratio"] = figures["tool"]["p95"] / figures["rg"]["p95"]
    figures["p50_ratio"] = figures["tool"]["p50"] / figures["rg"]["p50"]
    figures["ratio_per_pattern"] = stats(r["tool_s"] / r["rg_s"] for r in rows)
    print(f"grep tool                         {ms(figures['tool'])}")
    print(f"rg -n                             {ms(figures['rg'])}")
    print(f"rg with the tool's flags          {ms(figures['rg_tool_flags'])}")
    print(f"tool / rg -n: p50 x{figures['p50_ratio']:.2f}, p95 x{figures['p95_ratio']:.2f}")
    each = figures["ratio_per_pattern"]
    print(f"tool / rg -n per pattern: p50 x{each['p50']:.2f}, p95 x{each['p95']:.2f}")
    return figures


# ---------------------------------------------------------------------------------- summary


def summary(results: dict[str, Any]) -> None:
    """Each headline figure beside its goal."""
    rows: list[tuple[str, str, str]] = []

    def row(measure: str, value: str, goal: str = "", met: bool | None = None) -> None:
        rows.append(
            (measure, value, goal + ("" if met is None else "  met" if met else "  NOT MET"))
        )

    for key in ("cold_combined", "cold_focus"):
        if c := results.get(key):
            name = f"cold {c['root']} ({c['files_total']} files)"
            wall, rss = c["wall_s"], c["peak_rss_mb"]
            if key == "cold_focus":
                row(f"{name}: wall", f"{wall:.1f} s", "< 30 s on 2 cores", wall < 30)
                row(f"{name}: peak RSS", f"{rss:.0f} MB", "< 1 GB", rss < 1024)
            else:
                row(f"{name}: wall", f"{wall:.1f} s")
                row(f"{name}: peak RSS", f"{rss:.0f} MB")
            if c.get("held_mb") is not None:
                row(f"{name}: RSS once served from the snapshot", f"{c['held_mb']:.0f} MB")
            row(f"{name}: index size", f"{c['index_mb']:.1f} MB")
    if w := results.get("warm"):
        row("warm: load persisted index", f"{w['load_s']:.2f} s", "< 1 s", w["load_s"] < 1)
        row("warm: refresh(), nothing changed", ms(w["refresh_nothing_changed"]))
    if u := results.get("update"):
        row("1 file: refresh_paths([file])", ms(u["refresh_paths_1"]))
        row("1 file: refresh()", ms(u["refresh_1"]))
        for branch in (BRANCH, "main"):
            c = u[f"checkout_{branch}"]
            row(f"checkout {branch} ({c['changed']} files): refresh()", f"{c['refresh_s']:.2f} s")
        if b := u.get("background"):
            row("checkout, refresh(wait=False): returns", f"{b['returned_s']:.2f} s")
            row("checkout, background read: done", f"{b['read_s']:.2f} s")
            if b["query_during"]:
                row(
                    f"checkout: search() during the read (n={b['queries']})",
                    ms(b["query_during"]),
                    "p95 < 100 ms",
                    b["query_during"]["p95"] < 0.1,
                )
    for label, figure in results.get("query", {}).items():
        row(f"search(), {label}", ms(figure), "p95 < 100 ms", figure["p95"] < 0.1)
    if g := results.get("grep"):
        row("grep tool", ms(g["tool"]))
        row("raw rg -n", ms(g["rg"]))
        row("grep tool p95 / rg -n p95", f"x{g['p95_ratio']:.2f}", "< x1.2", g["p95_ratio"] < 1.2)
        each = g["ratio_per_pattern"]
        row("grep tool / rg -n, per pattern", f"p50 x{each['p50']:.2f}  p95 x{each['p95']:.2f}")
    width = max((len(r[0]) for r in rows), default=10)
    print(f"\n{'measure':<{width}}  {'result':<32}  goal")
    for measure, value, goal in rows:
        print(f"{measure:<{width}}  {value:<32}  {goal}")


def parse_only(values: list[str] | None) -> list[str]:
    """The phases to run, from repeated or comma-separated `--only`."""
    if not values:
        return list(PHASES)
    chosen = [p.strip() for v in values for p in v.split(",") if p.strip()]
    for phase in chosen:
        if phase not in PHASES:
            raise SystemExit(f"unknown phase {phase!r}; choose from {', '.join(PHASES)}")
    return [p for p in PHASES if p in chosen]


def main() -> None:
    """Build the tree and print the figures."""
    if len(sys.argv) == 4 and sys.argv[1] == "--cold-child":
        cold_child(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("repos", nargs="*", type=Path, help="bare repositories to export")
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=Path.home() / ".cache" / "kestrel-bench" / "mirrors",
        help="folder of bare clones (owner+name/repo or name.git), used when none are named",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=Path.home() / ".cache" / "kestrel-bench" / "index-scale",
        help="where the combined tree and its index caches live (outside the project)",
    )
    parser.add_argument(
        "--target-files", type=int, default=30_000, help="add django-old below this many files"
    )
    parser.add_argument(
        "--ages",
        type=lambda text: [int(x) for x in text.split(",") if x],
        default=[],
        help="years back: add older snapshots of every repository up to --target-files",
    )
    parser.add_argument("--skip-build", action="store_true", help="use the tree already built")
    parser.add_argument("--only", action="append", help=f"phases: {', '.join(PHASES)}")
    parser.add_argument("--runs", type=int, default=20, help="one-file updates to time")
    parser.add_argument("--grep-runs", type=int, default=3, help="timed runs per grep pattern")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    options = parser.parse_args()
    options.work = options.work.expanduser().resolve()
    if options.work.is_relative_to(REPO):
        raise SystemExit(f"--work {options.work} is inside the project; put it elsewhere")
    phases = parse_only(options.only)
    if options.runs < 1 or options.grep_runs < 1:
        raise SystemExit("--runs and --grep-runs must be at least 1")
    options.work.mkdir(parents=True, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{platform.machine()}, {cpus} cores (load {load}), {platform.python_implementation()} "
        f"{platform.python_version()}, {git('--version').strip()}"
    )
    manifest = build(options)
    print_sizes(manifest)
    combined = options.work / "combined"
    focus = focus_repo(manifest)
    cache = options.work / "index-cache"
    results: dict[str, Any] = {
        "machine": {"arch": platform.machine(), "cores": cpus, "load": os.getloadavg()},
        "tree": manifest,
        "phases": phases,
    }
    print()
    if "cold" in phases:
        results["cold_combined"] = {"root": "combined", **cold(combined, cache / "combined")}
        results["cold_focus"] = {"root": focus, **cold(combined / focus, cache / "focus")}
    if "update" in phases or "query" in phases:
        print()
        engine, results["warm"] = open_warm(combined, cache / "combined")
        try:
            if "update" in phases:
                results["update"] = update(engine, combined, focus, options.runs)
            if "query" in phases:
                results["query"] = queries(engine)
        finally:
            engine.close()
    if "grep" in phases:
        results["grep"] = asyncio.run(grep(combined, options.work, options.grep_runs))
    summary(results)
    if options.json:
        options.json.write_text(json.dumps(results, indent=1))
        print(f"\nwrote {options.json}")


if __name__ == "__main__":
    main()
