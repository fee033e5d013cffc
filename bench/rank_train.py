"""Train the learned rankers on mined histories; report them; write the shipped models.

    python bench/rank_train.py --mirrors DIR            # mine (if needed), train, report, write
    python bench/rank_train.py --data DIR [--dev FILE.npz] [--kind file|definition|both]
                               [--units 8] [--epochs 10] [--l2 0.01] [--no-write]
                               [--train-on message,changelog,report] [--score-on ...]

The one command that retrains: it runs `bench/rank_data.py` first when `--data` holds no mined
tasks. For each kind of model (files, and definitions: functions, methods and classes) it then
measures the model leaving one repository out at a time (trained on the other repositories'
tasks, scored on that one's) and prints Acc@1/@5/@10 of the hand order and of the model per
repository and overall (a mined task counts as found when any file or definition it changed is
among the first k). With `--dev` (a `bench/localization.py --dump` file) it also scores a model
trained on every mined task on that set, which is only ever measured, never trained on; there a
definition task counts only when all its gold functions are among the first k, as the
localization benchmark counts them. Last it trains on every mined task and writes
`src/kestrel/context/ranker.json` and `definition_ranker.json`.

`--train-on` and `--score-on` choose the mined tasks by where their query came from (the commit
`message`, the change's `changelog` entry, or a `report`: that text and the test code the change
added); both default to `message`, which is what the shipped models are trained on.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kestrel.context.learned import WEIGHTS_FILES, LearnedRanker, train

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "kestrel" / "context"
Group = tuple[np.ndarray, np.ndarray]
_KEYS = {"file": ("rows", "labels", "sizes"), "definition": ("def_rows", "def_labels", "def_sizes")}


def load_groups(path: Path, kind: str = "file") -> list[Group]:
    """The tasks of one dump: (candidate rows, labels) each."""
    rows_key, labels_key, sizes_key = _KEYS[kind]
    with np.load(path) as data:
        rows, labels, sizes = data[rows_key], data[labels_key], data[sizes_key]
    cuts = np.cumsum(sizes)[:-1]
    return list(zip(np.split(rows, cuts), np.split(labels, cuts), strict=True))


def task_sources(path: Path) -> list[str]:
    """Where each task of a mined dump took its query from (`message` or `changelog`)."""
    with np.load(path) as data:
        if "sources" in data:
            return [str(s) for s in data["sources"]]
        return ["message"] * len(data["sizes"])


def dev_needs(path: Path) -> list[int] | None:
    """How many gold definitions each task of a localization dump has (None: not recorded)."""
    with np.load(path) as data:
        return data["def_need"].tolist() if "def_need" in data else None


def accuracy(
    groups: Sequence[Group],
    models: Sequence[LearnedRanker | None] | LearnedRanker | None,
    needs: Sequence[int] | None = None,
) -> dict[int, float]:
    """Acc@k in the hand order (model None) or a model's (one for all, or one per task).

    A task is found at k when its labelled candidates among the first k reach its need (one,
    unless `needs` says how many); a task that needs none is left out.
    """
    hits = {1: 0, 5: 0, 10: 0}
    counted = 0
    for n, (rows, labels) in enumerate(groups):
        need = 1 if needs is None else needs[n]
        if need <= 0:
            continue
        counted += 1
        model = models[n] if isinstance(models, Sequence) else models
        order = (
            np.arange(len(labels))
            if model is None
            else np.argsort(-model.score(rows), kind="stable")
        )
        ranked = labels[order]
        for k in hits:
            hits[k] += int(ranked[:k].sum()) >= need
    return {k: 100.0 * v / max(counted, 1) for k, v in hits.items()}


def line(name: str, acc: dict[int, float], n: int) -> str:
    return f"{name:<48} n={n:<5} " + "  ".join(f"@{k} {v:5.1f}" for k, v in acc.items())


def mined(data: Path, kind: str, sources: frozenset[str]) -> dict[str, list[Group]]:
    """Every mined dump in `data`, by repository, keeping tasks whose query came from one of
    `sources`. Tasks that changed no definition are left out of the definition ranking; a task
    whose answer is not among the candidates stays (a miss)."""
    by_repo: dict[str, list[Group]] = {}
    for path in sorted(data.glob("*.npz")):
        repo = path.name.split("@", 1)[0].replace("__", "/")
        groups = load_groups(path, kind)
        needs = dev_needs(path) if kind == "definition" else None
        needs = needs or [1] * len(groups)
        wanted = [s in sources for s in task_sources(path)]
        groups = [g for g, n, w in zip(groups, needs, wanted, strict=True) if n > 0 and w]
        if groups:
            by_repo.setdefault(repo, []).extend(groups)
    return by_repo


def one_kind(kind: str, args: argparse.Namespace) -> LearnedRanker:
    """Report the leave-one-repository-out and dev figures of `kind`; the final model."""
    by_repo = mined(args.data, kind, args.train_on)
    scored = mined(args.data, kind, args.score_on)
    knobs = {"units": args.units, "epochs": args.epochs, "l2": args.l2}
    groups: list[Group] = []
    models: list[LearnedRanker] = []
    print(f"\n== {kind} ranking")
    for repo in sorted(by_repo):
        others = [g for name, found in by_repo.items() if name != repo for g in found]
        model = train(others, kind=kind, **knobs)  # type: ignore[arg-type]
        held = scored.get(repo, [])
        print(line(f"{repo}, hand", accuracy(held, None), len(held)))
        print(line(f"{repo}, learned", accuracy(held, model), len(held)))
        groups.extend(held)
        models.extend([model] * len(held))
    print(line("each repository left out in turn, hand", accuracy(groups, None), len(groups)))
    print(line("each repository left out in turn, learned", accuracy(groups, models), len(groups)))
    about = (
        f"{kind} ranker trained {datetime.date.today().isoformat()} on "
        f"{sum(len(found) for found in by_repo.values())} tasks "
        f"mined from {len(by_repo)} repositories' histories ({', '.join(sorted(by_repo))})"
    )
    every = [g for found in by_repo.values() for g in found]
    final = train(every, kind=kind, about=about, **knobs)  # type: ignore[arg-type]
    if args.dev:
        dev = load_groups(args.dev, kind)
        needs = dev_needs(args.dev) if kind == "definition" else None
        count = len(dev) if needs is None else sum(1 for n in needs if n > 0)
        print(line("localization dev (measured only), hand", accuracy(dev, None, needs), count))
        print(line("localization dev (measured only), learned", accuracy(dev, final, needs), count))
    return final


def _sources(value: str) -> frozenset[str]:
    chosen = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = chosen - {"message", "changelog", "report"}
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"choose from message, changelog, report; not {value!r}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=REPO / "bench-results" / "rank-data")
    parser.add_argument("--mirrors", type=Path, default=None, help="for mining, when needed")
    parser.add_argument("--dev", type=Path, default=None, help="a localization --dump to measure")
    parser.add_argument("--kind", choices=("file", "definition", "both"), default="both")
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--l2", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=PACKAGE, help="folder the models go to")
    parser.add_argument(
        "--train-on",
        type=_sources,
        default=_sources("message"),
        help="queries to train on: message, changelog, report (comma-separated; default message)",
    )
    parser.add_argument(
        "--score-on",
        type=_sources,
        default=_sources("message"),
        help="queries the held-out repository is scored on",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if not any(args.data.glob("*.npz")):
        if args.mirrors is None:
            raise SystemExit(f"no mined tasks in {args.data}: give --mirrors DIR to mine them")
        miner = [
            sys.executable,
            str(REPO / "bench" / "rank_data.py"),
            "--mirrors",
            str(args.mirrors),
        ]
        subprocess.run([*miner, "--out", str(args.data)], check=True)
    kinds = ("file", "definition") if args.kind == "both" else (args.kind,)
    for kind in kinds:
        model = one_kind(kind, args)
        if not args.no_write:
            target = args.out / WEIGHTS_FILES[kind]
            target.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n")
            print(f"wrote {target} ({target.stat().st_size / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
