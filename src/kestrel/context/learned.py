"""Small learned models that reorder the engine's best candidate files or definitions.

The model is a one-hidden-layer network (or a linear model, with no hidden units) over the
standardised rows of `kestrel.context.features`, trained listwise: for each task, the softmax of
its candidates' scores should put the probability on the files the change touched. It is trained
on public repositories' histories (`bench/rank_train.py`) and shipped as a small JSON file; scoring
is two matrix products in numpy.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from kestrel.context.features import DEFINITION_FEATURES, FILE_FEATURES

SPACES = {"file": FILE_FEATURES, "definition": DEFINITION_FEATURES}
"""What each kind of model ranks, and the features a row of that kind holds."""
WEIGHTS_FILES = {"file": "ranker.json", "definition": "definition_ranker.json"}
"""The shipped models, inside this package."""


class RankerError(ValueError):
    """A model file that cannot be used (wrong shape, unknown features, not JSON)."""


@dataclass(frozen=True, slots=True)
class LearnedRanker:
    """Scores candidate rows; higher is more likely the file a task is about."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    hidden: np.ndarray  # (features, units); zero columns for a linear model
    hidden_bias: np.ndarray  # (units,)
    out: np.ndarray  # (units,)
    linear: np.ndarray  # (features,)
    kind: str = "file"
    """`file` (rows of FILE_FEATURES) or `definition` (rows of DEFINITION_FEATURES)."""
    about: str = ""
    """Where the model came from: data, date, figures (shown by `kestrel index --explain`)."""

    def score(self, rows: np.ndarray) -> np.ndarray:
        """One score per row (columns of FILE_FEATURES or DEFINITION_FEATURES, by `kind`)."""
        x = (self._columns(rows) - self.mean) / self.scale
        score = x @ self.linear
        if self.out.size:
            score = score + np.maximum(x @ self.hidden + self.hidden_bias, 0.0) @ self.out
        return np.asarray(score, dtype=np.float64)

    def _columns(self, rows: np.ndarray) -> np.ndarray:
        space = SPACES[self.kind]
        if self.features == space:
            return rows.astype(np.float64)
        picks = [space.index(name) for name in self.features]
        return rows[:, picks].astype(np.float64)

    def to_json(self) -> dict[str, Any]:
        """The model as plain JSON (rounded: the file ships in the package)."""

        def r(a: np.ndarray) -> list[Any]:
            return np.round(a, 6).tolist()  # type: ignore[no-any-return]

        return {
            "format": 1,
            "kind": self.kind,
            "about": self.about,
            "features": list(self.features),
            "mean": r(self.mean),
            "scale": r(self.scale),
            "hidden": r(self.hidden),
            "hidden_bias": r(self.hidden_bias),
            "out": r(self.out),
            "linear": r(self.linear),
        }

    @classmethod
    def from_json(cls, raw: Any) -> LearnedRanker:
        """Read a model written by `to_json`, checking every shape."""
        if not isinstance(raw, dict) or raw.get("format") != 1:
            raise RankerError("not a ranker model (format 1 expected)")
        kind = raw.get("kind", "file")
        if kind not in SPACES:
            raise RankerError(f"unknown model kind {kind!r} (file or definition)")
        try:
            features = tuple(str(f) for f in raw["features"])
            unknown = [f for f in features if f not in SPACES[kind]]
            if unknown:
                raise RankerError(f"unknown features: {', '.join(unknown)}")
            n = len(features)
            model = cls(
                features=features,
                mean=_array(raw["mean"], (n,)),
                scale=_array(raw["scale"], (n,)),
                hidden=_array(raw["hidden"], (n, -1)),
                hidden_bias=_array(raw["hidden_bias"], (-1,)),
                out=_array(raw["out"], (-1,)),
                linear=_array(raw["linear"], (n,)),
                kind=kind,
                about=str(raw.get("about", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RankerError(f"malformed ranker model: {exc}") from exc
        units = model.out.size
        if model.hidden.shape[1] != units or model.hidden_bias.size != units:
            raise RankerError("malformed ranker model: hidden layer shapes disagree")
        if not np.all(model.scale > 0):
            raise RankerError("malformed ranker model: scales must be positive")
        return model

    @classmethod
    def load(cls, path: Path) -> LearnedRanker:
        """A model from a JSON file."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RankerError(f"{path}: {exc}") from exc
        return cls.from_json(raw)


def _array(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if a.ndim != len(shape) or any(
        want not in (-1, got) for want, got in zip(shape, a.shape, strict=False)
    ):
        raise ValueError(f"expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("non-finite number")
    return a


DEFAULT_RANKERS = {"file": "hand", "definition": "learned"}
"""What `KESTREL_RANKER` and `KESTREL_DEFINITION_RANKER` mean when unset."""
_VARIABLES = {"file": "KESTREL_RANKER", "definition": "KESTREL_DEFINITION_RANKER"}


def default_ranker(
    env: Mapping[str, str] | None = None, kind: str = "file"
) -> LearnedRanker | None:
    """The learned model of `kind` its variable asks for, else None (the hand-fused order).

    `KESTREL_RANKER` (files) and `KESTREL_DEFINITION_RANKER` (definitions) take `learned` for
    the model shipped in the package, `hand` for none, or a path ending in `.json` for a model
    of the user's own (`bench/rank_train.py --out`). Files default to `hand`: on the
    localization dev split of bug reports the learned file model ranked worse than the
    hand-tuned fusion, though better on the held-out change descriptions it was trained on.
    Definitions default to `learned`: there it lifted function Acc@5 from 42.9% to 55.4%
    (docs/context.md). A bad setting or model file costs the model, never the engine: one line
    on stderr says why.
    """
    env = os.environ if env is None else env
    variable = _VARIABLES[kind]
    choice = env.get(variable, DEFAULT_RANKERS[kind]).strip()
    if choice.lower() in ("hand", "none", "off", "0", "false", ""):
        return None
    try:
        if choice.lower() == "learned":
            model = shipped_ranker(kind)
            if model is None:
                raise RankerError("this installation has no shipped model")
            return model
        if choice.endswith(".json"):
            model = LearnedRanker.load(Path(choice).expanduser())
            if model.kind != kind:
                raise RankerError(f"{choice} is a {model.kind} model, not a {kind} model")
            return model
    except RankerError as exc:
        print(f"kestrel: {variable}: {exc}; ranking by the hand-fused order", file=sys.stderr)
        return None
    print(
        f"kestrel: unknown {variable} {choice!r} (choose hand, learned or a model's .json "
        "path); ranking by the hand-fused order",
        file=sys.stderr,
    )
    return None


def default_definition_ranker(env: Mapping[str, str] | None = None) -> LearnedRanker | None:
    """`default_ranker` for definitions (`KESTREL_DEFINITION_RANKER`, learned by default)."""
    return default_ranker(env, "definition")


def shipped_ranker(kind: str = "file") -> LearnedRanker | None:
    """The model of `kind` shipped in the package, or None when the package has none."""
    try:
        name = WEIGHTS_FILES[kind]
        text = resources.files("kestrel.context").joinpath(name).read_text("utf-8")
        raw = json.loads(text)
    except (FileNotFoundError, OSError):
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RankerError(f"the shipped model is damaged: {exc}") from exc
    model = LearnedRanker.from_json(raw)
    if model.kind != kind:
        raise RankerError(f"the shipped {kind} model is a {model.kind} model")
    return model


def softmax_loss(scores: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Listwise loss of one task (gold files share the target) and its gradient."""
    shifted = scores - scores.max()
    p = np.exp(shifted)
    p /= p.sum()
    target = labels / labels.sum()
    loss = float(-(target * np.log(p + 1e-12)).sum())
    return loss, p - target


def train(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    kind: str = "file",
    features: Sequence[str] | None = None,
    units: int = 16,
    epochs: int = 60,
    l2: float = 1e-3,
    rate: float = 0.01,
    seed: int = 0,
    about: str = "",
) -> LearnedRanker:
    """Fit a model to tasks given as (candidate rows, 0/1 labels); tasks without a 1 are skipped.

    Adam over one task at a time, in a fixed random order per epoch: the same data and seed give
    the same model.
    """
    space = SPACES[kind]
    features = space if features is None else tuple(features)
    picks = [space.index(f) for f in features]
    kept = [(x[:, picks].astype(np.float64), y) for x, y in groups if y.any()]
    if not kept:
        raise RankerError("no task has a labelled candidate to learn from")
    stacked = np.vstack([x for x, _ in kept])
    mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    scale[scale < 1e-6] = 1.0
    data = [((x - mean) / scale, y.astype(np.float64)) for x, y in kept]
    rng = np.random.default_rng(seed)
    n = len(picks)
    params = {
        "linear": np.zeros(n),
        "hidden": rng.normal(0, 0.3, (n, units)),
        "hidden_bias": np.zeros(units),
        "out": rng.normal(0, 0.1, units) if units else np.zeros(0),
    }
    adam = _Adam(params, rate)
    for _ in range(epochs):
        for i in rng.permutation(len(data)):
            x, y = data[i]
            adam.step(_gradients(params, x, y, l2))
    return LearnedRanker(
        features=tuple(features),
        mean=mean,
        scale=scale,
        hidden=params["hidden"],
        hidden_bias=params["hidden_bias"],
        out=params["out"],
        linear=params["linear"],
        kind=kind,
        about=about,
    )


def _gradients(
    params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, l2: float
) -> dict[str, np.ndarray]:
    pre = x @ params["hidden"] + params["hidden_bias"]
    act = np.maximum(pre, 0.0)
    scores = x @ params["linear"] + act @ params["out"]
    _, d = softmax_loss(scores, y)
    d_act = np.outer(d, params["out"]) * (pre > 0)
    return {
        "linear": x.T @ d + l2 * params["linear"],
        "out": act.T @ d + l2 * params["out"],
        "hidden": x.T @ d_act + l2 * params["hidden"],
        "hidden_bias": d_act.sum(axis=0),
    }


class _Adam:
    def __init__(self, params: dict[str, np.ndarray], rate: float) -> None:
        self.params = params
        self.rate = rate
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads: dict[str, np.ndarray]) -> None:
        self.t += 1
        for key, g in grads.items():
            self.m[key] = 0.9 * self.m[key] + 0.1 * g
            self.v[key] = 0.999 * self.v[key] + 0.001 * g * g
            m_hat = self.m[key] / (1 - 0.9**self.t)
            v_hat = self.v[key] / (1 - 0.999**self.t)
            self.params[key] -= self.rate * m_hat / (np.sqrt(v_hat) + 1e-8)
