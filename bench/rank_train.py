"""Train the learned ranker on mined histories; report it; write the shipped model.

    python bench/rank_train.py --mirrors DIR            # mine (if needed), train, report, write
    python bench/rank_train.py --data DIR [--dev FILE.npz] [--units 8] [--epochs 10]
                               [--l2 0.01] [--features a,b,...] [--no-write]

The one command that retrains: it runs `bench/rank_data.py` first when `--data` holds no mined
tasks. It then measures the model leaving one repository out at a time (trained on the other
repositories' tasks, scored on that one's) and prints Acc@1/@5/@10 of the hand-fused order and
of the model per repository and overall; with `--dev` (a `bench/localization.py --dump` file) it
also scores a model trained on every mined task on that set, which is only ever measured, never
trained on. Last it trains on every mined task and writes `src/kestrel/context/ranker.json`.
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

from kestrel.context.features import FILE_FEATURES
from kestrel.context.learned import LearnedRanker, train

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "src" / "kestrel" / "context" / "ranker.json"
Group = tuple[np.ndarray, np.ndarray]


def load_groups(path: Path) -> list[Group]:
    """The tasks of one dump: (candidate rows, labels) each."""
    with np.load(path) as data:
        rows, labels, sizes = data["rows"], data["labels"], data["sizes"]
    cuts = np.cumsum(sizes)[:-1]
    return list(zip(np.split(rows, cuts), np.split(labels, cuts), strict=True))


def accuracy(groups: Sequence[Group], model: LearnedRanker | None) -> dict[int, float]:
    """Acc@k: a labelled file among the first k (the hand order when `model` is None)."""
    hits = {1: 0, 5: 0, 10: 0}
    for rows, labels in groups:
        if model is None:
            order = np.arange(len(labels))
        else:
            order = np.argsort(-model.score(rows), kind="stable")
        ranked = labels[order]
        for k in hits:
            hits[k] += bool(ranked[:k].any())
    return {k: 100.0 * v / max(len(groups), 1) for k, v in hits.items()}


def show(name: str, groups: Sequence[Group], model: LearnedRanker | None) -> str:
    acc = accuracy(groups, model)
    return f"{name:<44} n={len(groups):<5} " + "  ".join(f"@{k} {v:5.1f}" for k, v in acc.items())


def learned_line(name: str, scored: Sequence[tuple[Group, LearnedRanker]]) -> str:
    """Acc@k over tasks each scored by its own model."""
    hits = {1: 0, 5: 0, 10: 0}
    for (rows, labels), model in scored:
        ranked = labels[np.argsort(-model.score(rows), kind="stable")]
        for k in hits:
            hits[k] += bool(ranked[:k].any())
    n = max(len(scored), 1)
    return f"{name:<44} n={len(scored):<5} " + "  ".join(
        f"@{k} {100.0 * v / n:5.1f}" for k, v in hits.items()
    )


def mined(data: Path) -> dict[str, list[Group]]:
    """Every mined dump in `data`, by repository."""
    by_repo: dict[str, list[Group]] = {}
    for path in sorted(data.glob("*.npz")):
        repo = path.name.split("@", 1)[0].replace("__", "/")
        by_repo.setdefault(repo, []).extend(load_groups(path))
    return by_repo


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=REPO / "bench-results" / "rank-data")
    parser.add_argument("--mirrors", type=Path, default=None, help="for mining, when needed")
    parser.add_argument("--dev", type=Path, default=None, help="a localization --dump to measure")
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--l2", type=float, default=0.01)
    parser.add_argument("--features", default=",".join(FILE_FEATURES))
    parser.add_argument("--out", type=Path, default=SHIPPED)
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
    features = [f for f in args.features.split(",") if f]
    by_repo = mined(args.data)
    knobs = {"units": args.units, "epochs": args.epochs, "l2": args.l2, "features": features}
    hand: list[Group] = []
    scored: list[tuple[Group, LearnedRanker]] = []
    for repo in sorted(by_repo):
        others = [g for name, groups in by_repo.items() if name != repo for g in groups]
        model = train(others, **knobs)  # type: ignore[arg-type]
        print(show(f"{repo}, hand order", by_repo[repo], None))
        print(show(f"{repo}, learned", by_repo[repo], model))
        hand.extend(by_repo[repo])
        scored.extend((g, model) for g in by_repo[repo])
    print(show("every repository left out in turn, hand", hand, None))
    print(learned_line("every repository left out in turn, learned", scored))
    everything = [g for groups in by_repo.values() for g in groups]
    about = (
        f"trained {datetime.date.today().isoformat()} on {len(everything)} tasks mined from "
        f"{len(by_repo)} repositories' histories ({', '.join(sorted(by_repo))})"
    )
    final = train(everything, about=about, **knobs)  # type: ignore[arg-type]
    if args.dev:
        dev = load_groups(args.dev)
        print(show("localization dev (measured only), hand", dev, None))
        print(show("localization dev (measured only), learned", dev, final))
    if args.no_write:
        return
    args.out.write_text(json.dumps(final.to_json(), separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
