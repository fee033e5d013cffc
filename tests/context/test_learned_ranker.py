"""The learned ranker: training learns what separates answers, models round-trip and are checked,
the engine applies one, and the git history it reads is right."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from context_kit import committed_repo, git, write

from kestrel.context.engine import ContextEngine
from kestrel.context.features import DEFINITION_FEATURES, FILE_FEATURES
from kestrel.context.history import head_of, read_history
from kestrel.context.learned import (
    LearnedRanker,
    RankerError,
    default_definition_ranker,
    default_ranker,
    shipped_ranker,
    train,
)


def _groups(seed: int, n: int = 120) -> list[tuple[np.ndarray, np.ndarray]]:
    """Tasks whose answer stands out by its `mention` (every other column is noise)."""
    rng = np.random.default_rng(seed)
    col = FILE_FEATURES.index("mention")
    groups = []
    for _ in range(n):
        rows = rng.random((20, len(FILE_FEATURES))).astype(np.float32)
        labels = np.zeros(20, dtype=np.int8)
        answer = int(rng.integers(20))
        labels[answer] = 1
        rows[answer, col] += 1.0
        groups.append((rows, labels))
    return groups


def _top1(model: LearnedRanker, groups: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return float(np.mean([labels[int(np.argmax(model.score(rows)))] for rows, labels in groups]))


@pytest.mark.parametrize("units", [0, 8])
def test_training_learns_the_feature_that_marks_the_answer(units: int) -> None:
    model = train(_groups(1), units=units, epochs=15)
    held_out = _groups(2, 60)
    # Chance would pick the answer one time in twenty.
    assert _top1(model, held_out) > 0.9
    assert train(_groups(1), units=units, epochs=15).to_json() == model.to_json()


def test_a_model_round_trips_through_json_and_scores_the_same() -> None:
    model = train(_groups(3, 40), units=4, epochs=3, about="test model")
    again = LearnedRanker.from_json(json.loads(json.dumps(model.to_json())))
    rows = _groups(4, 1)[0][0]
    assert np.allclose(model.score(rows), again.score(rows), atol=1e-3)
    assert again.about == "test model"


def test_a_model_on_fewer_features_reads_only_its_columns() -> None:
    model = train(_groups(5, 60), features=("mention", "lexical_file"), units=0, epochs=10)
    assert model.features == ("mention", "lexical_file")
    assert _top1(model, _groups(6, 40)) > 0.9


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"format": 2}, "format 1"),
        ({"features": ["mention", "no_such_feature"]}, "unknown features"),
        ({"mean": [0.0]}, "shape"),
        ({"linear": [float("nan")] * len(FILE_FEATURES)}, "non-finite"),
        ({"scale": [0.0] * len(FILE_FEATURES)}, "positive"),
        ({"out": [1.0, 2.0, 3.0]}, "disagree"),
    ],
)
def test_malformed_models_are_refused_with_a_reason(change: dict[str, object], said: str) -> None:
    raw = train(_groups(7, 10), units=2, epochs=1).to_json()
    raw.update(change)
    with pytest.raises(RankerError, match=said):
        LearnedRanker.from_json(raw)


def test_training_without_any_answer_is_an_error() -> None:
    rows = np.zeros((5, len(FILE_FEATURES)), dtype=np.float32)
    with pytest.raises(RankerError, match="no task"):
        train([(rows, np.zeros(5, dtype=np.int8))])


def test_an_unreadable_model_file_is_a_ranker_error(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text("{not json")
    with pytest.raises(RankerError, match=r"model\.json"):
        LearnedRanker.load(path)


@pytest.mark.parametrize(
    ("kind", "space"), [("file", FILE_FEATURES), ("definition", DEFINITION_FEATURES)]
)
def test_both_shipped_models_load_and_score_their_rows(kind: str, space: tuple[str, ...]) -> None:
    model = shipped_ranker(kind)
    assert model is not None and model.kind == kind
    assert model.features and set(model.features) <= set(space)
    assert "trained" in model.about
    scores = model.score(np.zeros((3, len(space)), dtype=np.float32))
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def _one_feature_model(feature: str, weight: float, kind: str = "file") -> LearnedRanker:
    space = FILE_FEATURES if kind == "file" else DEFINITION_FEATURES
    n = len(space)
    linear = np.zeros(n)
    linear[space.index(feature)] = weight
    return LearnedRanker(
        features=space,
        mean=np.zeros(n),
        scale=np.ones(n),
        hidden=np.zeros((n, 0)),
        hidden_bias=np.zeros(0),
        out=np.zeros(0),
        linear=linear,
        kind=kind,
    )


def test_the_engine_orders_files_by_its_ranker(tmp_path: Path) -> None:
    files = {
        "billing/invoice.py": "def invoice_total(lines):\n    return sum(lines)  # invoice total\n",
        "billing/tests/test_invoice.py": "def test_invoice_total():\n    assert invoice_total([])",
    }
    root = committed_repo(tmp_path / "repo", files)
    engine = ContextEngine.open(root, tmp_path / "cache")
    engine.refresh()
    task = "invoice_total gives the wrong invoice total"
    assert engine.search(task).files[0].path == "billing/invoice.py"
    # A (silly) model that prefers tests proves the model, not the hand fusion, decides.
    engine.ranker = _one_feature_model("test", 5.0)
    engine.refresh()
    result = engine.search(task)
    assert [hit.path for hit in result.files][:2] == [
        "billing/tests/test_invoice.py",
        "billing/invoice.py",
    ]
    assert result.files[0].score == 1.0
    paths, rows = engine.file_features(task)
    assert set(paths) == set(files)
    assert rows.shape == (2, len(FILE_FEATURES))
    assert rows[:, FILE_FEATURES.index("has_history")].tolist() == [1.0, 1.0]
    engine.close()


def test_history_counts_commits_per_file_relative_to_the_root(tmp_path: Path) -> None:
    root = committed_repo(tmp_path / "repo", {"pkg/a.py": "a = 1\n", "pkg/b.py": "b = 1\n"})
    for n in range(3):
        write(root, {"pkg/a.py": f"a = {n + 2}\n"})
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", f"a {n}")
    head = head_of(root)
    assert head is not None and len(head) == 40
    history = read_history(root, head)
    assert history is not None and history.depth == 4
    assert history.touched == {"pkg/a.py": 4, "pkg/b.py": 1}
    assert history.newest == {"pkg/a.py": 0, "pkg/b.py": 3}
    assert history.recency("pkg/a.py") == 1.0 > history.recency("pkg/b.py") > 0
    assert history.churn("missing.py") == 0.0
    inner = read_history(root / "pkg", head)
    assert inner is not None and set(inner.touched) == {"a.py", "b.py"}


def test_no_history_outside_a_git_work_tree(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert head_of(tmp_path / "plain") is None


def test_past_changes_like_the_task_vote_for_their_files(tmp_path: Path) -> None:
    root = committed_repo(
        tmp_path / "repo",
        {"app/cache.py": "x = 1\n", "app/render.py": "y = 1\n", "app/tests/test_cache.py": "\n"},
    )
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam"]
    write(root, {"app/cache.py": "x = 2\n", "app/tests/test_cache.py": "z = 1\n"})
    git(root, *commit, "Fixed stale entries surviving an eviction under memory pressure")
    write(root, {"app/render.py": "y = 2\n"})
    git(root, *commit, "Made templates escape attribute values")
    head = head_of(root)
    assert head is not None
    history = read_history(root, head)
    assert history is not None
    votes = history.similar({"evict": 1, "stal": 1, "pressur": 1, "zebra": 1})
    # Test files do not vote; the one similar change's source file gets the whole vote.
    assert votes == {"app/cache.py": 1.0}
    assert history.similar({"zebra": 1}) == {}


def test_kestrel_ranker_chooses_the_model_and_bad_settings_fall_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert default_ranker({}) is None
    assert default_ranker({"KESTREL_RANKER": "hand"}) is None
    learned = default_ranker({"KESTREL_RANKER": "learned"})
    assert learned is not None and "trained" in learned.about
    own = tmp_path / "mine.json"
    own.write_text(json.dumps(_one_feature_model("mention", 1.0).to_json()))
    mine = default_ranker({"KESTREL_RANKER": str(own)})
    assert mine is not None and mine.features == FILE_FEATURES
    assert capsys.readouterr().err == ""
    assert default_ranker({"KESTREL_RANKER": "clever"}) is None
    assert "unknown KESTREL_RANKER 'clever'" in capsys.readouterr().err
    own.write_text('{"format": 1}')
    assert default_ranker({"KESTREL_RANKER": str(own)}) is None
    assert "malformed ranker model" in capsys.readouterr().err
    assert default_ranker({"KESTREL_RANKER": str(tmp_path / "gone.json")}) is None
    assert "gone.json" in capsys.readouterr().err


def test_the_engine_orders_definitions_by_its_definition_ranker(tmp_path: Path) -> None:
    source = (
        "def refund_total(order):\n    return order.refund_total  # refund total refund\n\n\n"
        "def _refund_rounding(order):\n    return round(order.refund)\n"
    )
    root = committed_repo(tmp_path / "repo", {"shop/refunds.py": source})
    engine = ContextEngine.open(root, tmp_path / "cache")
    engine.refresh()
    task = "refund_total refund total is wrong"
    names = [s.qualname for s in engine.search(task).symbols]
    assert names[0] == "refund_total"
    engine.definition_ranker = _one_feature_model("private", 5.0, "definition")
    reranked = engine.search(task).symbols
    assert [s.qualname for s in reranked][:2] == ["_refund_rounding", "refund_total"]
    assert reranked[0].score == 1.0
    keys, rows = engine.definition_features(task)
    assert set(keys) == {"shop/refunds.py::refund_total", "shop/refunds.py::_refund_rounding"}
    assert rows.shape == (2, len(DEFINITION_FEATURES))
    engine.close()


def test_definition_models_know_their_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(30):
        rows = rng.random((10, len(DEFINITION_FEATURES))).astype(np.float32)
        labels = np.zeros(10, dtype=np.int8)
        labels[0] = 1
        rows[0, DEFINITION_FEATURES.index("chunk")] += 1.0
        groups.append((rows, labels))
    model = train(groups, kind="definition", units=0, epochs=5)
    again = LearnedRanker.from_json(json.loads(json.dumps(model.to_json())))
    assert again.kind == "definition" and again.features == DEFINITION_FEATURES
    with pytest.raises(RankerError, match="unknown model kind"):
        LearnedRanker.from_json({**model.to_json(), "kind": "module"})
    with pytest.raises(RankerError, match="unknown features"):
        LearnedRanker.from_json({**model.to_json(), "kind": "file"})
    shipped = default_definition_ranker({})
    assert shipped is not None and shipped.kind == "definition"
    assert default_definition_ranker({"KESTREL_DEFINITION_RANKER": "hand"}) is None
    wrong = tmp_path / "file-model.json"
    wrong.write_text(json.dumps(_one_feature_model("mention", 1.0).to_json()))
    assert default_definition_ranker({"KESTREL_DEFINITION_RANKER": str(wrong)}) is None
    assert "is a file model, not a definition model" in capsys.readouterr().err
