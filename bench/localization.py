"""Localization benchmark: does the context engine rank the file and functions a task is about?

    python bench/localization.py [--data PATH] [--mirrors DIR] [--work DIR] [--limit N]
                                 [--instances ID,ID] [--ablate SIGNAL,...] [--json OUT]
                                 [--grid WEIGHTS.json] [--dump FEATURES.npz]
                                 [--rerank-model PROVIDER:MODEL [--rerank-candidates N]]

Runs `ContextEngine.search` on each instance's `problem_statement` alone (nothing else from the
instance is read at query time) over the repository checked out at `base_commit`, and prints file
Acc@1/@5/@10, function Acc@5/@10, index time and query latency. Repositories come from bare clones
(`--mirrors DIR` holding `owner+name/repo` or `owner+name.git`; otherwise the public mirrors
named in `mirror_sources.json` are cloned); one work tree per repository lives under `--work`,
outside this project, and moves from commit to commit, so after the first instance of a
repository the index is updated incrementally, exactly as it would be after a `git checkout`.

The semantic signal is on when the embedding model is installed (`--ablate semantic` drops it
from the ranking of files and definitions, `--ablate semantic_symbol` from definitions only;
`KESTREL_EMBEDDER=none` does not embed at all).

`--grid FILE` ranks each instance once more for every named set of weights in FILE
(`{"name": {"weight": value, ...}, ...}`, fields of `kestrel.context.rank.Weights`, applied over
the defaults or the `--ablate`d ones) and prints one accuracy table per set: tuning many weights
costs one pass over the checkouts, not one each. Tune on this dev split only.

The engine ranks as configured: `KESTREL_DEFINITION_RANKER` and `KESTREL_RANKER` choose the
learned rankers (docs/context.md). `--dump` writes every task's candidate files' and definitions'
feature rows and labels (what `bench/rank_train.py --dev` measures models on); `--rerank-model`
also scores a model's order of the best `--rerank-candidates` files (`localization_rerank.py`).

Goals on the dev split, without any model call: file Acc@1 >= 70%, Acc@5 >= 92%, function
Acc@5 >= 65%.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from localization_rerank import Reranker

from kestrel.context.embed import default_embedder
from kestrel.context.engine import ContextEngine
from kestrel.context.learned import default_definition_ranker, default_ranker
from kestrel.context.rank import Weights

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "bench" / "localization"
SIGNALS = ("lexical_file", "lexical_chunk", "identifier", "mention", "semantic", "semantic_symbol")


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git, failing loudly."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def bare_clone(repo: str, sources: dict[str, str], mirrors: Path | None, work: Path) -> Path:
    """A bare clone holding the repository's commits: a local mirror, else a fresh clone."""
    source = sources[repo]
    slug = source.replace("/", "+")
    if mirrors is not None:
        for candidate in (mirrors / slug / "repo", mirrors / f"{slug}.git", mirrors / slug):
            if (candidate / "HEAD").exists():
                return candidate
    target = work / "mirrors" / f"{slug}.git"
    if not (target / "HEAD").exists():
        print(f"cloning {source} ...", file=sys.stderr)
        git("clone", "--bare", "--quiet", f"https://github.com/{source}.git", str(target))
    return target


def checkout(bare: Path, tree: Path, commit: str) -> None:
    """Move the repository's work tree to `commit` (creating it on first use).

    Mirrors may lack a few large data blobs, which git refuses to check out; such a commit is
    exported file by file without them instead (they are data files, never a gold file).
    """
    missing = missing_blobs(bare, commit)
    if missing:
        export_tree(bare, tree, commit, set(missing))
        return
    if not (tree / ".git").is_file():  # a worktree has a .git file; an exported tree a folder
        if tree.exists():
            shutil.rmtree(tree)
        git("--git-dir", str(bare), "worktree", "prune")
        git("--git-dir", str(bare), "worktree", "add", "--detach", "--force", str(tree), commit)
        return
    git("checkout", "--quiet", "--detach", "--force", commit, cwd=tree)
    git("clean", "-fdxq", cwd=tree)


def export_tree(bare: Path, tree: Path, commit: str, missing: set[str]) -> None:
    """Write every blob of `commit` that the mirror has into a fresh `git init` directory."""
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    listing = git("--git-dir", str(bare), "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = [item.split("\t", 1) for item in listing.split("\0") if " blob " in item]
    wanted = [(meta.split()[2], path) for meta, path in entries if path not in missing]
    batch = subprocess.run(
        ["git", "--git-dir", str(bare), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in wanted).encode(),
        capture_output=True,
        check=True,
    ).stdout
    at = 0
    for _, path in wanted:
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        body = batch[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    git("init", "--quiet", cwd=tree)


def missing_blobs(bare: Path, commit: str) -> list[str]:
    """Paths at `commit` whose blobs the object store does not have."""
    listing = git("--git-dir", str(bare), "ls-tree", "-r", "-z", "--full-tree", commit)
    blobs = [item.split("\t", 1) for item in listing.split("\0") if " blob " in item]
    query = "".join(meta.split()[2] + "\n" for meta, _ in blobs)
    done = subprocess.run(
        ["git", "--git-dir", str(bare), "cat-file", "--batch-check"],
        input=query,
        capture_output=True,
        text=True,
        check=False,
    )
    answers = done.stdout.splitlines()
    return [
        path
        for (_, path), answer in zip(blobs, answers, strict=False)
        if answer.endswith("missing")
    ]


def score(instance: dict[str, Any], files: list[str], functions: list[str]) -> dict[str, Any]:
    """Acc@k for files (the one gold file) and functions (all gold functions)."""
    gold = instance["gold_files"][0]
    out: dict[str, Any] = {f"file@{k}": gold in files[:k] for k in (1, 5, 10)}
    wanted = set(instance["gold_functions"])
    if wanted:
        for k in (5, 10):
            out[f"func@{k}"] = wanted <= set(functions[:k])
    out["rank"] = files.index(gold) + 1 if gold in files else None
    out["func_ranks"] = {f: functions.index(f) + 1 if f in functions else None for f in wanted}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=SHARED / "lite_dev.jsonl")
    parser.add_argument("--sources", type=Path, default=SHARED / "mirror_sources.json")
    parser.add_argument("--mirrors", type=Path, default=None)
    parser.add_argument(
        "--work", type=Path, default=Path.home() / ".cache" / "kestrel-bench" / "localization"
    )
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--instances", default="")
    parser.add_argument(
        "--ablate", default="", help=f"comma-separated signals to switch off: {', '.join(SIGNALS)}"
    )
    parser.add_argument("--json", type=Path, default=None, help="write per-instance results here")
    parser.add_argument(
        "--grid", type=Path, default=None, help="JSON of named weight sets to rank with as well"
    )
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write every task's candidate files' ranker features and labels here (.npz)",
    )
    parser.add_argument(
        "--rerank-model",
        default=None,
        help="also score a model's reranking of the best candidates (PROVIDER:MODEL)",
    )
    parser.add_argument("--rerank-candidates", type=int, default=30)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    if args.instances:
        wanted = set(args.instances.split(","))
        rows = [r for r in rows if r["instance_id"] in wanted]
    rows = rows[: args.limit] if args.limit else rows
    rows.sort(key=lambda r: (r["repo"], r["created_at"]))
    sources = json.loads(args.sources.read_text())
    weights = Weights()
    for signal in filter(None, args.ablate.split(",")):
        if signal not in SIGNALS:
            raise SystemExit(f"unknown signal {signal!r}; choose from {', '.join(SIGNALS)}")
        weights = replace(weights, **{signal: 0.0})
        if signal == "semantic":  # the whole layer: its lift of definitions goes too
            weights = replace(weights, semantic_symbol=0.0)

    grid = load_grid(args.grid, weights)
    graded: dict[str, list[dict[str, Any]]] = {name: [] for name in grid}
    args.work.mkdir(parents=True, exist_ok=True)
    cache = args.work / "index-cache"
    shutil.rmtree(cache, ignore_errors=True)
    results: list[dict[str, Any]] = []
    engines: dict[str, ContextEngine] = {}
    embedder = default_embedder()  # None with KESTREL_EMBEDDER=none or without the model
    reranker = Reranker.of(args.rerank_model, args.rerank_candidates) if args.rerank_model else None
    reranked: list[dict[str, Any]] = []
    dumped: list[tuple[np.ndarray, np.ndarray]] = []
    dumped_paths: list[str] = []
    dumped_defs: list[tuple[np.ndarray, np.ndarray]] = []
    for n, row in enumerate(rows, 1):
        repo = row["repo"]
        tree = args.work / "trees" / repo.replace("/", "__")
        checkout(bare_clone(repo, sources, args.mirrors, args.work), tree, row["base_commit"])
        engine = engines.get(repo)
        if engine is None:
            engine = engines[repo] = ContextEngine.open(
                tree,
                cache,
                embedder=embedder,
                ranker=default_ranker(),
                definition_ranker=default_definition_ranker(),
            )
        engine.weights = weights
        report = engine.refresh()
        engine.search(row["problem_statement"], k=10)  # warm caches; the next one is timed
        result = engine.search(row["problem_statement"], k=10, symbols_per_file=5)
        files = [hit.path for hit in result.files]
        functions = [f"{s.path}::{s.qualname}" for s in result.symbols]
        scored = score(row, files, functions)
        if reranker is not None:
            ordered = reranker.files(engine, row["problem_statement"])
            files_only = {k: v for k, v in score(row, ordered, []).items() if k.startswith("file")}
            reranked.append({"instance_id": row["instance_id"], **files_only})
        if args.dump:
            paths, features = engine.file_features(row["problem_statement"])
            dumped.append((features, np.array([p == row["gold_files"][0] for p in paths])))
            dumped_paths.extend(paths)
            keys, candidates = engine.definition_features(row["problem_statement"])
            gold = set(row["gold_functions"])
            labelled = np.array([key in gold for key in keys], dtype=np.int8)
            dumped_defs.append((candidates, labelled))
        results.append(
            {
                "instance_id": row["instance_id"],
                "index_s": round(report.took_s, 3),
                "changed_files": report.added + report.changed + report.removed,
                "files": report.files_total,
                "query_ms": round(result.took_ms, 2),
                "top5": files[:5],
                **scored,
            }
        )
        mark = "ok " if scored["file@1"] else ("top5" if scored["file@5"] else "MISS")
        print(
            f"[{n:>3}/{len(rows)}] {mark:<4} rank={scored['rank']!s:<4} index {report.took_s:6.2f}s"
            f" ({report.added + report.changed + report.removed} changed of {report.files_total})"
            f"  query {result.took_ms:6.1f} ms  {row['instance_id']}",
            flush=True,
        )
        if args.verbose and not scored["file@1"]:
            print(f"      gold {row['gold_files'][0]}; got {files[:3]}")
        for name, variant in grid.items():
            engine.weights = variant
            other = engine.search(row["problem_statement"], k=10, symbols_per_file=5)
            graded[name].append(
                {
                    "instance_id": row["instance_id"],
                    "query_ms": other.took_ms,
                    **score(
                        row,
                        [hit.path for hit in other.files],
                        [f"{s.path}::{s.qualname}" for s in other.symbols],
                    ),
                }
            )
    for engine in engines.values():
        engine.close()
    summarize(results)
    if reranker is not None:
        print(f"\n--rerank-model {args.rerank_model}: {reranker.summary()}")
        summarize(reranked, timings=False)
    for name, rows_graded in graded.items():
        print(f"\n--grid {name}: {grid[name]}")
        summarize(rows_graded, timings=False)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.dump:
        np.savez_compressed(
            args.dump,
            rows=np.vstack([found for found, _ in dumped]),
            labels=np.concatenate([labels for _, labels in dumped]).astype(np.int8),
            sizes=np.array([len(labels) for _, labels in dumped]),
            paths=np.array(dumped_paths),
            def_rows=np.vstack([found for found, _ in dumped_defs]),
            def_labels=np.concatenate([labels for _, labels in dumped_defs]),
            def_sizes=np.array([len(labels) for _, labels in dumped_defs]),
            def_need=np.array([len(row["gold_functions"]) for row in rows]),
        )


def load_grid(path: Path | None, base: Weights) -> dict[str, Weights]:
    """The named weight sets of a `--grid` file, each applied over `base`."""
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"--grid {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise SystemExit(f"--grid {path}: expected an object of named weight sets")
    grid: dict[str, Weights] = {}
    for name, fields in raw.items():
        try:
            grid[name] = replace(base, **fields)
        except TypeError as exc:
            raise SystemExit(f"--grid {path}: set {name!r}: {exc}") from exc
    return grid


def summarize(results: list[dict[str, Any]], *, timings: bool = True) -> None:
    """Print the accuracy table and the timing figures."""
    if not results:
        print("no instances")
        return

    def pct(key: str) -> str:
        scored = [r[key] for r in results if key in r]
        return f"{100 * sum(scored) / len(scored):5.1f}% (of {len(scored)})" if scored else "n/a"

    print()
    for key in ("file@1", "file@5", "file@10", "func@5", "func@10"):
        print(f"{key:<8} {pct(key)}")
    if not timings:
        return
    queries = sorted(r["query_ms"] for r in results)
    p95 = queries[min(len(queries) - 1, int(0.95 * len(queries)))]
    print(f"query ms  p50 {statistics.median(queries):.1f}  p95 {p95:.1f}  max {queries[-1]:.1f}")
    cold = [r["index_s"] for r in results if r["changed_files"] == r["files"]]
    warm = [r["index_s"] for r in results if r["changed_files"] != r["files"]]
    if cold:
        print(
            f"cold index s  median {statistics.median(cold):.2f}  max {max(cold):.2f}"
            f"  ({len(cold)} repos)"
        )
    if warm:
        print(f"update after checkout s  median {statistics.median(warm):.2f}  max {max(warm):.2f}")


if __name__ == "__main__":
    main()
