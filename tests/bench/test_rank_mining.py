"""The ranker's training data and the reranking harness, on tiny real repositories: which changes
become tasks, what a mined task holds, and the harness scoring a scripted model's order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rank_data
from localization_rerank import Reranker

from kestrel.context.engine import ContextEngine
from kestrel.context.features import DEFINITION_FEATURES, FILE_FEATURES
from kestrel.models.scripted import ScriptedProvider

SIGN = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def test_messages_lose_trailers_merge_lines_and_issue_numbers() -> None:
    message = (
        "Merge pull request #12 from someone/branch\n\n"
        "Fix the cache keeping stale entries after eviction (#123)\n\n"
        "Signed-off-by: A Person <a@b.c>\nCo-authored-by: B <b@c.d>\n"
    )
    assert rank_data.clean_message(message) == (
        "Fix the cache keeping stale entries after eviction"
    )


@pytest.mark.parametrize(
    ("message", "modified", "touched", "kept"),
    [
        ("Fix eviction leaving stale entries in the cache layer", ["pkg/cache.py"], [], True),
        ("Fix cache", ["pkg/cache.py"], [], False),  # too short to be a task
        ("Bump version to 2.0 for the upcoming release of it", ["pkg/cache.py"], [], False),
        ("Add tests for eviction of stale entries in the cache", ["tests/test_c.py"], [], False),
        (
            "Split the cache into modules for eviction and storage",
            ["pkg/cache.py"],
            ["A\tpkg/store.py"],
            False,
        ),  # a new source file cannot be found at the base
        ("Fix eviction leaving stale entries in the cache layer", ["pkg/gone.py"], [], False),
    ],
)
def test_which_changes_become_tasks(
    message: str, modified: list[str], touched: list[str], kept: bool
) -> None:
    change = {"commit": "c0ffee", "message": message, "modified": modified, "touched": touched}
    tasks = rank_data.keep(Path("/nowhere"), change, {"pkg/cache.py", "tests/test_c.py"})
    assert bool(tasks) is kept
    assert all(task["gold"] == ["pkg/cache.py"] for task in tasks)


def test_benchmark_repositories_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["rank_data.py", "--mirrors", "/nowhere", "--repos", "pallets/werkzeug,psf/requests"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="psf/requests"):
        rank_data.main()


def _history(root: Path) -> Path:
    """A repository whose later changes each fix one module, mirrored bare."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name in ("cache", "render", "network"):
        (root / f"{name}.py").write_text(f"def {name}_entry(x):\n    return x\n")
    git(root, "add", ".")
    git(root, *SIGN, "commit", "-qm", "Start the project with its three modules")
    for n in range(4):
        (root / "cache.py").write_text(f"def cache_entry(x):\n    return x + {n}\n")
        git(
            root,
            *SIGN,
            "commit",
            "-qam",
            f"Fix cache_entry eviction that dropped the stale entries too early, case {n}",
        )
    bare = root.parent / "mirrors" / "me+proj" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(root), str(bare)], check=True)
    return bare


def test_mining_writes_each_tasks_candidates_and_labels(tmp_path: Path) -> None:
    bare = _history(tmp_path / "proj")
    out = tmp_path / "out"
    out.mkdir()
    tasks = rank_data.mine("me/proj", bare, tmp_path / "work", out, bases=1, window=10)
    assert tasks and all(t["gold"] == ["cache.py"] for t in tasks)
    assert all(t["functions"] == ["cache.py::cache_entry"] for t in tasks)
    [dump] = list(out.glob("*.npz"))
    with np.load(dump) as data:
        assert data["rows"].shape == (int(data["sizes"].sum()), len(FILE_FEATURES))
        assert len(data["paths"]) == len(data["labels"]) == int(data["sizes"].sum())
        labelled = set(data["paths"][data["labels"] == 1].tolist())
        defs = int(data["def_sizes"].sum())
        assert data["def_rows"].shape == (defs, len(DEFINITION_FEATURES))
        assert data["def_need"].tolist() == [1] * len(tasks)
        assert int(data["def_labels"].sum()) == len(tasks)  # cache_entry, once per task
    assert labelled == {"cache.py"}


def test_a_changelog_entry_and_the_added_test_code_make_more_tasks(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "news").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "cache.py").write_text("def cache_entry(x):\n    return x\n")
    (root / "tests" / "test_cache.py").write_text("import cache\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, *SIGN, "commit", "-qm", "Start")
    (root / "cache.py").write_text("def cache_entry(x):\n    return x + 1\n")
    (root / "news" / "12.bugfix.rst").write_text(
        "Fixed issue where :func:`cache.cache_entry` returned the key it was given unchanged,\n"
        "so that every lookup missed (:issue:`12`).\n"
    )
    (root / "tests" / "test_cache.py").write_text(
        "import cache\n\n\ndef test_entry_moves():\n    assert cache.cache_entry(1) == 2\n"
    )
    git(root, "add", ".")
    git(root, *SIGN, "commit", "-qm", "Fix cache_entry returning its key unchanged for lookups")
    sha = git(root, "rev-parse", "HEAD").strip()
    change = rank_data.changes(root / ".git", f"{sha}^", 5)[0]
    tasks = rank_data.keep(root / ".git", change, {"cache.py", "tests/test_cache.py"})
    assert [t.get("source", "message") for t in tasks] == ["message", "changelog", "report"]
    assert all(t["gold"] == ["cache.py"] for t in tasks)
    entry = tasks[1]["query"]
    assert entry.startswith("Fixed issue where cache.cache_entry returned the key")
    assert ":func:" not in entry and "12" not in entry
    assert tasks[2]["query"] == f"{entry}\n\ndef test_entry_moves():\n" + (
        "    assert cache.cache_entry(1) == 2"
    )


def test_the_harness_scores_a_models_order_and_counts_unreadable_answers(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("cache", "render"):
        (root / f"{name}.py").write_text(f"def {name}_entry(x):\n    return x  # {name}\n")
    engine = ContextEngine.open(root, tmp_path / "cache")
    engine.refresh()
    task = "cache_entry and render_entry both misbehave in the cache"
    engine_order = [h.path for h in engine.search(task, k=5).files]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "[2, 1]"}]))
    swapped = Reranker(ScriptedProvider.from_file(script), candidates=5)
    assert swapped.files(engine, task) == engine_order[::-1]
    assert swapped.summary()["input_tokens_per_task"] > 0
    script.write_text(json.dumps([{"text": "the cache one"}]))
    unread = Reranker(ScriptedProvider.from_file(script), candidates=5)
    assert unread.files(engine, task) == engine_order
    assert unread.summary()["unread_or_failed"] == 1
    engine.close()
