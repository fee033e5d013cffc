"""Training data for the learned ranker, mined from public repositories' histories.

    python bench/rank_data.py --mirrors DIR [--repos owner/name,...] [--bases 4] [--window 150]
                              [--work DIR] [--out DIR]

Each task is one change on a repository's first-parent history (a pull request's merge or a
squashed commit): its message is the query, and the source files it modified are the answer.
The repository is checked out at a base commit a little before the change (one base serves the
next `--window` changes, so one index answers them all) and the context engine ranks its files
and definitions for the message; every candidate's feature row and label go to
`OUT/<repo>@<base>.npz` (files: `rows`, `labels`, `sizes`, `paths`; definitions: `def_rows`,
`def_labels`, `def_sizes`, and `def_need`, how many definitions the change touched: the innermost
ones around its diff's old lines, in the parent's version of the file; `sources`, where each
task's query came from: `message` or `changelog`), and the tasks themselves to
`OUT/tasks.jsonl`.

What is kept: changes that modify one to three existing non-test, non-doc Python files, whose
message (trailers, issue references and merge boilerplate removed) has at least 8 words, and is
not a release, version bump, revert or automated update.

A change that also writes a changelog entry (a news fragment such as pip's `news/N.bugfix.rst`,
SQLAlchemy's `unreleased_*/N.rst`, Hypothesis's `RELEASE.rst`, or lines added to a
`CHANGES.rst`) gives a second task with the same answer: the entry's text as the query (markup
removed, at least 8 words), marked `"source": "changelog"`. Entries are written for users and
describe behaviour ("Fixed issue where ... would fail when ..."), as bug reports do; commit
messages summarise the fix in the code's own words. The repositories are chosen so that
no task of the localization benchmark comes from them (`BENCHMARK_REPOS` are refused).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from kestrel.context.engine import ContextEngine
from kestrel.context.rank import is_doc_path, is_test_path
from kestrel.context.symbols import extract_symbols

sys.path.insert(0, str(Path(__file__).resolve().parent))
from localization import checkout

REPO = Path(__file__).resolve().parent.parent
TRAINING_REPOS = (
    "sqlalchemy/sqlalchemy",
    "networkx/networkx",
    "python/mypy",
    "pypa/pip",
    "ipython/ipython",
    "encode/django-rest-framework",
    "pallets/werkzeug",
    "dask/dask",
    "HypothesisWorks/hypothesis",
    "scrapy/scrapy",
    "statsmodels/statsmodels",
    "bokeh/bokeh",
)
BENCHMARK_REPOS = frozenset(
    {
        "django/django",
        "sympy/sympy",
        "scikit-learn/scikit-learn",
        "matplotlib/matplotlib",
        "sphinx-doc/sphinx",
        "pytest-dev/pytest",
        "astropy/astropy",
        "pydata/xarray",
        "pylint-dev/pylint",
        "psf/requests",
        "mwaskom/seaborn",
        "pallets/flask",
    }
)
"""Every repository SWE-bench draws tasks from: never trained on."""

_TRAILER = re.compile(r"^[A-Za-z][\w-]*(-by|-authored-by)?:\s", re.IGNORECASE)
_MERGE = re.compile(r"^Merge (pull request|branch|remote-tracking branch) .*$")
_ISSUE_REF = re.compile(r"\s*\((?:gh-|GH-|#)\d+\)|\[(?:skip ci|ci skip)\]", re.IGNORECASE)
_SKIP = re.compile(
    r"^(bump|release|prepare|version|revert|update (changelog|version|copyright)|\[pre-commit|"
    r"pre-commit|auto|changelog|docs?:|typo|lint|style|format|merge)\b",
    re.IGNORECASE,
)


def git(bare: Path, *args: str) -> str:
    """A git command on the bare mirror, failing loudly."""
    done = subprocess.run(
        ["git", "--git-dir", str(bare), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def clean_message(message: str) -> str:
    """The words of a change's message that say what it is about."""
    lines = [line for line in message.strip().splitlines() if not _TRAILER.match(line)]
    if lines and _MERGE.match(lines[0]):
        lines = lines[1:]
    text = "\n".join(lines).strip()
    return _ISSUE_REF.sub("", text).strip()


def changes(bare: Path, base: str, limit: int) -> list[dict[str, Any]]:
    """The next `limit` first-parent changes after `base`: id, message, modified files."""
    out = git(
        bare,
        "log",
        "--first-parent",
        "--reverse",
        "--diff-merges=first-parent",
        "--name-status",
        "--no-renames",
        "--format=%x00%H%x01%B%x02",
        f"{base}..HEAD",
    )
    found: list[dict[str, Any]] = []
    for record in out.split("\0")[1:]:
        head, _, files = record.partition("\x02")
        sha, _, message = head.partition("\x01")
        modified = [
            line.split("\t", 1)[1] for line in files.strip().splitlines() if line.startswith("M\t")
        ]
        touched = [line for line in files.strip().splitlines() if line.strip()]
        found.append({"commit": sha, "message": message, "modified": modified, "touched": touched})
        if len(found) >= limit:
            break
    return found


_CHANGELOG = re.compile(
    r"(^|/)(news|unreleased[^/]*|whatsnew/pr)/[^/]+\.(rst|md|txt)$|"
    r"(^|/)(changes|changelog|release|history)(\.(rst|md|txt))?$",
    re.IGNORECASE,
)
_MARKUP_LINE = re.compile(
    r"^\s*(\.\. [\w-]+::.*|:[\w-]+:.*|RELEASE_TYPE:.*|[-=~^*#+]{3,}|Version .*|Unreleased.*)$",
    re.IGNORECASE,
)
_REFERENCE = re.compile(
    r":(issue|pr|ticket|tickets|bug|user|ghissue|gh|pull):`[^`]*`|"
    r"\(\s*(?:[#]?\d+[,\s]*)+\)|\[ticket:\d+\]",
    re.IGNORECASE,
)
_EMPTY = re.compile(r"\s*\(\s*\)")
_ROLE = re.compile(r":[\w:-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def changelog_paths(change: dict[str, Any]) -> list[str]:
    """The changelog entries a change added or extended."""
    return [
        line[2:]
        for line in change["touched"]
        if line[:2] in ("A\t", "M\t") and _CHANGELOG.search(line[2:])
    ]


def changelog_text(bare: Path, commit: str, paths: list[str]) -> str:
    """The words a change added to its changelog entries, without reStructuredText markup."""
    diff = git(bare, "diff", "--no-renames", "-U0", f"{commit}^1", commit, "--", *paths)
    kept: list[str] = []
    for line in diff.splitlines():
        if not line.startswith("+") or line.startswith("+++"):
            continue
        text = line[1:].strip().lstrip("-*").strip()
        if text and not _MARKUP_LINE.match(text):
            text = _ROLE.sub(r"\1", _EMPTY.sub("", _REFERENCE.sub("", text)))
            kept.append(_ISSUE_REF.sub("", text).replace("``", "").strip())
    return " ".join(kept).strip()


def answer(change: dict[str, Any], present: set[str]) -> list[str] | None:
    """The source files a change modified, or None when it is not a good task."""
    source = [
        p
        for p in change["modified"]
        if p.endswith(".py") and not is_test_path(p) and not is_doc_path(p)
    ]
    added_source = [
        line
        for line in change["touched"]
        if line.startswith("A\t") and line.endswith(".py") and not is_test_path(line[2:])
    ]
    if not 1 <= len(source) <= 3 or added_source or not all(p in present for p in source):
        return None
    return source


def keep(bare: Path, change: dict[str, Any], present: set[str]) -> list[dict[str, Any]]:
    """The tasks a change makes: its message's, and its changelog entry's when it wrote one."""
    gold = answer(change, present)
    if gold is None:
        return []
    tasks: list[dict[str, Any]] = []
    query = clean_message(change["message"])
    if len(query.split()) >= 8 and not _SKIP.match(query):
        tasks.append({"commit": change["commit"], "query": query, "gold": gold})
    paths = changelog_paths(change)
    entry = changelog_text(bare, change["commit"], paths) if paths else ""
    if len(entry.split()) >= 8 and not _SKIP.match(query):
        tasks.append(
            {"commit": change["commit"], "query": entry, "gold": gold, "source": "changelog"}
        )
    code = test_code(bare, change)
    if tasks and code:
        words = tasks[-1]["query"]
        tasks.append({**tasks[-1], "query": f"{words}\n\n{code}", "source": "report"})
    return tasks


def test_code(bare: Path, change: dict[str, Any], lines: int = 30) -> str:
    """The first lines of test code a change added: what a bug report's example shows."""
    tests = [
        line[2:]
        for line in change["touched"]
        if line[:2] in ("A\t", "M\t") and line.endswith(".py") and is_test_path(line[2:])
    ]
    if not tests:
        return ""
    commit = change["commit"]
    diff = git(bare, "diff", "--no-renames", "-U0", f"{commit}^1", commit, "--", *tests)
    added = [
        line[1:]
        for line in diff.splitlines()
        if line.startswith("+") and not line.startswith("+++") and line[1:].strip()
    ]
    return textwrap.dedent("\n".join(added[:lines]))


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")


def changed_definitions(bare: Path, commit: str, paths: list[str]) -> list[str]:
    """`path::qualname` of the innermost definitions whose lines the change touched.

    Old-side lines of each hunk of `git diff -U0` against the first parent; a pure insertion
    counts the line it follows. Definitions come from the parent's version of the file.
    """
    diff = git(bare, "diff", "-U0", "--no-renames", f"{commit}^1", commit, "--", *paths)
    touched: dict[str, set[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            current = line[6:] if line.startswith("--- a/") else None
        elif current is not None and (found := _HUNK.match(line)):
            start, count = int(found.group(1)), int(found.group(2) or "1")
            span = range(start, start + count) if count else range(start, start + 1)
            touched.setdefault(current, set()).update(span)
    names: list[str] = []
    for path, lines in sorted(touched.items()):
        symbols = extract_symbols(path, git(bare, "show", f"{commit}^1:{path}"))
        if symbols is None:
            continue
        for line in sorted(lines):
            inside = [d for d in symbols.definitions if d.line <= line <= d.end_line]
            if inside:
                innermost = min(inside, key=lambda d: d.end_line - d.line)
                key = f"{path}::{innermost.qualname}"
                if key not in names:
                    names.append(key)
    return names


def mine(
    repo: str, bare: Path, work: Path, out: Path, bases: int, window: int
) -> list[dict[str, Any]]:
    """Tasks of one repository, with their candidates' features written beside them."""
    history = git(bare, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    # Bases spread over the newer half of the history, each leaving `window` changes after it.
    span = max(len(history) - window - 1, 0)
    picks = [history[int(span * (0.5 + 0.5 * i / max(bases - 1, 1)))] for i in range(bases)]
    tasks: list[dict[str, Any]] = []
    tree = work / "trees" / repo.replace("/", "__")
    engine: ContextEngine | None = None
    for base in picks:
        present = set(git(bare, "ls-tree", "-r", "--name-only", base).split("\n"))
        kept = [t for c in changes(bare, base, window) for t in keep(bare, c, present)]
        if not kept:
            continue
        checkout(bare, tree, base)
        if engine is None:
            engine = ContextEngine.open(tree, work / "index-cache", workers=0)
        report = engine.refresh()
        rows: list[np.ndarray] = []
        labels: list[np.ndarray] = []
        sizes: list[int] = []
        names: list[str] = []
        defs: list[np.ndarray] = []
        def_labels: list[np.ndarray] = []
        for task in kept:
            paths, features = engine.file_features(task["query"])
            gold = set(task["gold"])
            rows.append(features)
            labels.append(np.array([p in gold for p in paths], dtype=np.int8))
            sizes.append(len(paths))
            names.extend(paths)
            task["functions"] = changed_definitions(bare, task["commit"], task["gold"])
            keys, def_rows = engine.definition_features(task["query"])
            defs.append(def_rows)
            def_labels.append(np.array([k in task["functions"] for k in keys], dtype=np.int8))
            task.update(repo=repo, base=base, found=int(labels[-1].sum()))
        name = f"{repo.replace('/', '__')}@{base[:12]}.npz"
        np.savez_compressed(
            out / name,
            rows=np.vstack(rows),
            labels=np.concatenate(labels),
            sizes=np.array(sizes),
            paths=np.array(names),
            def_rows=np.vstack(defs),
            def_labels=np.concatenate(def_labels),
            def_sizes=np.array([len(labels) for labels in def_labels]),
            def_need=np.array([len(task["functions"]) for task in kept]),
            sources=np.array([task.get("source", "message") for task in kept]),
        )
        hit = sum(1 for t in kept if t["found"])
        print(
            f"{repo}@{base[:10]}: {len(kept)} tasks, {hit} with an answer among the candidates"
            f" ({report.files_total} files, index {report.took_s:.1f}s)",
            flush=True,
        )
        tasks.extend(kept)
    if engine is not None:
        engine.close()
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mirrors", type=Path, required=True, help="holds owner+name/repo")
    parser.add_argument("--repos", default=",".join(TRAINING_REPOS))
    parser.add_argument("--bases", type=int, default=4)
    parser.add_argument("--window", type=int, default=150)
    parser.add_argument(
        "--work", type=Path, default=Path.home() / ".cache" / "kestrel-bench" / "rank-data"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench-results" / "rank-data")
    args = parser.parse_args()
    repos = [r for r in args.repos.split(",") if r]
    refused = sorted(set(repos) & BENCHMARK_REPOS)
    if refused:
        raise SystemExit(f"benchmark repositories cannot be training data: {', '.join(refused)}")
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    everything: list[dict[str, Any]] = []
    for repo in repos:
        bare = args.mirrors / repo.replace("/", "+") / "repo"
        if not (bare / "HEAD").exists():
            print(f"skipped {repo}: no mirror at {bare}", file=sys.stderr)
            continue
        everything.extend(mine(repo, bare, args.work, args.out, args.bases, args.window))
    with (args.out / "tasks.jsonl").open("w") as handle:
        for task in everything:
            handle.write(json.dumps(task) + "\n")
    found = sum(1 for t in everything if t["found"])
    print(f"{len(everything)} tasks from {len(repos)} repositories; {found} answerable")


if __name__ == "__main__":
    main()
