"""Reopen benchmark: a saved context index of a ~31k-file tree, opened by a fresh process.

    python bench/index_reopen.py [REPO.git ...] [--mirrors DIR] [--work DIR] [--target-files N]
                                 [--skip-build] [--runs N] [--cache DIR] [--child-path DIR]
                                 [--json OUT]

1. The tree is the one `bench/index_scale.py` builds (same arguments, same `--work`; built there
   first unless it is up to date).
2. Its index is kept in `--cache` (default `<work>/reopen-cache`). When it is missing it is made
   in a child process: a cold index (minutes; the postings snapshot that later opens read is
   written at its end), then one more open. Both times are printed.
3. `--runs` times (after one untimed run that warms the OS cache), a fresh process imports the
   engine, then times `ContextEngine.open` (the reopen), `refresh()` with nothing changed (the
   stat pass that picks up files changed while closed), the first `search()`, and the 30
   keyword queries and 60 problem statements that follow, each run once (so the definitions
   they touch are decoded on the way, as in a real session). Peak RSS after the queries.

Goal: reopen under 1 s at 31k files (cold process, warm OS cache); queries once open p95 well
under 100 ms. `--child-path DIR` puts DIR first on the children's `PYTHONPATH`, to time another
copy of the code (an older one, say) on an index in the format it reads; nothing is prepared
then. Timings depend on the machine: note its cores and load with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GOAL_S = 1.0
HERE = Path(__file__).resolve().parent


def child(root: Path, cache: Path, queries: Path) -> None:
    """In a fresh process: import, reopen, refresh, query; print the figures as JSON."""
    started = time.perf_counter()
    from kestrel.context.embed import default_embedder
    from kestrel.context.engine import ContextEngine

    imported = time.perf_counter()
    embedder = default_embedder()
    began = time.perf_counter()
    engine = ContextEngine.open(root, cache, embedder=embedder)
    opened = time.perf_counter()
    report = engine.refresh()
    refreshed = time.perf_counter()
    rows = [json.loads(line) for line in queries.read_text().splitlines() if line.strip()]
    sys.path.insert(0, str(HERE))
    from index_scale import KEYWORDS

    texts = [*KEYWORDS, *(r["problem_statement"] for r in rows)]
    took = [engine.search(text, k=10).took_ms / 1000 for text in texts]
    figures = {
        "import_s": imported - started,
        "open_s": opened - began,
        "refresh_s": refreshed - opened,
        "refresh_changed": report.added + report.changed + report.removed,
        "files": report.files_total,
        "from_snapshot": getattr(engine, "opened_from_snapshot", None),
        "first_query_s": took[0],
        "keywords_s": took[1 : len(KEYWORDS)],
        "statements_s": took[len(KEYWORDS) :],
        "peak_rss_mb": _peak_rss_mb(),
    }
    engine.close()
    print(json.dumps(figures))


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(args: list[str], child_path: Path | None, *, quiet: bool = False) -> dict[str, Any]:
    env = dict(os.environ)
    if child_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(child_path), env.get("PYTHONPATH", "")) if p
        )
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the child {' '.join(args[:1])} failed (exit {done.returncode})")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not quiet:
        print(f"  {json.dumps({k: v for k, v in figures.items() if not k.endswith('_s')})}")
    return figures


def prepare_child(root: Path, cache: Path) -> None:
    """In a fresh process: a cold index, then one open that decodes everything and snapshots."""
    from kestrel.context.embed import default_embedder
    from kestrel.context.engine import ContextEngine

    embedder = default_embedder()
    started = time.perf_counter()
    engine = ContextEngine.open(root, cache, embedder=embedder)
    report = engine.refresh()
    engine.close()
    cold = time.perf_counter() - started
    started = time.perf_counter()
    engine = ContextEngine.open(root, cache, embedder=embedder)
    opened = time.perf_counter() - started
    from_snapshot = engine.opened_from_snapshot
    engine.close()  # waits for a snapshot being written
    closed = time.perf_counter() - started
    figures = {"cold_s": cold, "files": report.files_total, "second_open_s": opened}
    print(json.dumps({**figures, "from_snapshot": from_snapshot, "with_close_s": closed}))


def prepare(root: Path, cache: Path) -> None:
    from kestrel.context.index_store import index_path_for
    from kestrel.context.snapshot import snapshot_path

    index = index_path_for(root.resolve(), cache)
    if index.is_file() and snapshot_path(index).is_file():
        print(f"reusing the index under {cache}")
        return
    print("indexing the tree (a cold index, then an open that writes the snapshot) ...", flush=True)
    figures = run_child(["--prepare-child", str(root), str(cache)], None, quiet=True)
    print(
        f"cold index {figures['cold_s']:.1f} s ({figures['files']} files, snapshot written at "
        f"its end); the next open {figures['second_open_s']:.2f} s (from the snapshot: "
        f"{figures['from_snapshot']}), {figures['with_close_s']:.2f} s with its close"
    )


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(runs: list[dict[str, Any]]) -> dict[str, Any]:
    opens = [r["open_s"] for r in runs]
    firsts = [r["first_query_s"] for r in runs]
    keywords = [t for r in runs for t in r["keywords_s"]]
    statements = [t for r in runs for t in r["statements_s"]]
    summary = {
        "open_p50_s": p(opens, 0.5),
        "open_max_s": max(opens),
        "refresh_p50_s": p([r["refresh_s"] for r in runs], 0.5),
        "import_p50_s": p([r["import_s"] for r in runs], 0.5),
        "first_query_p50_s": p(firsts, 0.5),
        "first_query_max_s": max(firsts),
        "keywords_p50_s": p(keywords, 0.5),
        "keywords_p95_s": p(keywords, 0.95),
        "statements_p50_s": p(statements, 0.5),
        "statements_p95_s": p(statements, 0.95),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
    }
    met = "met" if summary["open_p50_s"] < GOAL_S else "not met"
    print()
    print(
        f"reopen (ContextEngine.open)    p50 {summary['open_p50_s']:6.2f} s   max "
        f"{summary['open_max_s']:6.2f} s   goal < {GOAL_S:.0f} s: {met}"
    )
    print(f"refresh(), nothing changed     p50 {summary['refresh_p50_s']:6.2f} s")
    print(f"import of the engine           p50 {summary['import_p50_s']:6.2f} s")
    print(
        f"first search() after reopening p50 {summary['first_query_p50_s'] * 1000:6.1f} ms  max "
        f"{summary['first_query_max_s'] * 1000:6.1f} ms"
    )
    print(
        f"then 29 keyword queries        p50 {summary['keywords_p50_s'] * 1000:6.1f} ms  p95 "
        f"{summary['keywords_p95_s'] * 1000:6.1f} ms"
    )
    print(
        f"then 60 problem statements     p50 {summary['statements_p50_s'] * 1000:6.1f} ms  p95 "
        f"{summary['statements_p95_s'] * 1000:6.1f} ms"
    )
    print(f"peak RSS                       {summary['peak_rss_mb']:.0f} MB")
    return summary


def main() -> None:
    """Build the tree and its index if needed, then time fresh processes reopening it."""
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--prepare-child":
        prepare_child(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    sys.path.insert(0, str(HERE))
    import index_scale

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("repos", nargs="*", type=Path, help="bare repositories to export")
    parser.add_argument(
        "--mirrors", type=Path, default=Path.home() / ".cache" / "kestrel-bench" / "mirrors"
    )
    parser.add_argument(
        "--work", type=Path, default=Path.home() / ".cache" / "kestrel-bench" / "index-scale"
    )
    parser.add_argument("--target-files", type=int, default=30_000)
    parser.add_argument("--skip-build", action="store_true", help="use the tree already built")
    parser.add_argument("--runs", type=int, default=5, help="timed reopening processes")
    parser.add_argument("--cache", type=Path, default=None, help="where the index is kept")
    parser.add_argument(
        "--child-path",
        type=Path,
        default=None,
        help="put this first on the children's PYTHONPATH (another copy of src/)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    options = parser.parse_args()
    if options.runs < 1:
        raise SystemExit("--runs must be at least 1")
    options.work = options.work.expanduser().resolve()
    if options.work.is_relative_to(index_scale.REPO):
        raise SystemExit(f"--work {options.work} is inside the project; put it elsewhere")
    if not index_scale.QUERIES.is_file():
        raise SystemExit(f"{index_scale.QUERIES} is missing: it holds the queries")
    options.work.mkdir(parents=True, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{platform.machine()}, {cpus} cores (load {load}), {platform.python_implementation()} "
        f"{platform.python_version()}"
    )
    manifest = index_scale.build(options)
    combined = options.work / "combined"
    cache = (options.cache or options.work / "reopen-cache").expanduser().resolve()
    if options.child_path is None:
        prepare(combined, cache)
    args = ["--child", str(combined), str(cache), str(index_scale.QUERIES)]
    run_child(args, options.child_path, quiet=True)  # warms the OS cache; not counted
    runs = []
    for n in range(options.runs):
        figures = run_child(args, options.child_path, quiet=True)
        print(
            f"run {n + 1}: open {figures['open_s']:.2f} s, refresh {figures['refresh_s']:.2f} s"
            f" ({figures['refresh_changed']} changed), first query "
            f"{figures['first_query_s'] * 1000:.0f} ms, from snapshot: "
            f"{figures['from_snapshot']}",
            flush=True,
        )
        runs.append(figures)
    summary = report(runs)
    if options.json:
        results = {
            "machine": {"cores": cpus, "load": os.getloadavg()},
            "tree": manifest,
            "runs": runs,
            "summary": summary,
        }
        options.json.write_text(json.dumps(results, indent=1))
        print(f"\nwrote {options.json}")


if __name__ == "__main__":
    main()
