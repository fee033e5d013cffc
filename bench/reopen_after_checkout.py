"""Reopen after a checkout: how long the next open of an index takes once 1,000 files changed.

    python bench/reopen_after_checkout.py --work DIR [--rounds N] [--close-at-once]
                                          [--child-path DIR] [--json OUT]

Uses the tree and index `bench/index_scale.py` builds under the same `--work` (the combined
tree, its `main` and `bench-1000` branches, and the index in `<work>/index-cache/combined`; run
its cold phase first). Each round, in fresh processes:

1. a session opens the index, checks out the other branch (1,000 files change), runs `refresh()`
   (timed) and, unless `--close-at-once`, goes on long enough for what the engine does in the
   background after it to finish (`wait_for_snapshot()`, timed), then closes;
2. a fresh process times `ContextEngine.open`, counts the rows it decodes (files whose content
   its snapshot does not hold) and its peak RSS, then the first `refresh()`.

Goal: the reopen under 1 s. `--child-path DIR` puts DIR first on the children's `PYTHONPATH`
to time another copy of the code (an older one, say) on the same index. The tree is left on
`main`. Timings depend on the machine: note its cores and load with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GOAL_S = 1.0
BRANCHES = ("bench-1000", "main")


def session(root: Path, cache: Path, branch: str, close_at_once: bool) -> dict[str, Any]:
    """Child: open, check `branch` out, refresh, let the background work end (or not), close."""
    from kestrel.context.engine import ContextEngine

    engine = ContextEngine.open(root, cache)
    subprocess.run(["git", "checkout", "--quiet", branch], cwd=root, check=True)
    started = time.perf_counter()
    changed = engine.refresh().changed
    refreshed = time.perf_counter()
    waited = 0.0
    if not close_at_once and hasattr(engine, "wait_for_snapshot"):
        engine.wait_for_snapshot()
        waited = time.perf_counter() - refreshed
    engine.close()
    return {"changed": changed, "refresh_s": refreshed - started, "background_s": waited}


def reopen(root: Path, cache: Path) -> dict[str, Any]:
    """Child: a fresh open, the rows it decodes, its peak RSS, then the first refresh."""
    import resource

    from kestrel.context.engine import ContextEngine
    from kestrel.context.index_store import IndexStore

    decoded: list[str] = []
    real = IndexStore.record

    def counted(self: IndexStore, path: str) -> Any:
        decoded.append(path)
        return real(self, path)

    IndexStore.record = counted  # type: ignore[method-assign]
    started = time.perf_counter()
    engine = ContextEngine.open(root, cache)
    opened = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    changed = engine.refresh().changed
    refreshed = time.perf_counter()
    engine.close()
    return {
        "open_s": opened - started,
        "decoded": len(decoded),
        "rss_mb": rss,
        "first_refresh_s": refreshed - opened,
        "refresh_changed": changed,
        "from_snapshot": engine.opened_from_snapshot,
    }


def in_child(work: Path, args: list[str], child_path: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    paths = [str(p) for p in (child_path,) if p is not None]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).strip(os.pathsep)
    out = subprocess.run(
        [sys.executable, __file__, "--work", str(work), "--child", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"child failed: {out.stderr.strip()[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--close-at-once", action="store_true")
    parser.add_argument("--child-path", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    root = options.work.resolve() / "combined"
    cache = options.work.resolve() / "index-cache" / "combined"
    if options.child:
        kind, *rest = options.child
        if kind == "session":
            out = session(root, cache, rest[0], rest[1] == "1")
        else:
            out = reopen(root, cache)
        print(json.dumps(out))
        return
    if not (root / ".git").is_dir() or not cache.is_dir():
        sys.exit(f"no tree or index under {options.work}: run bench/index_scale.py --only cold")
    subprocess.run(["git", "checkout", "--quiet", "--force", "main"], cwd=root, check=True)
    in_child(options.work, ["reopen"], options.child_path)  # up to date with `main`, OS cache warm
    rounds: list[dict[str, Any]] = []
    for n in range(options.rounds):
        branch = BRANCHES[n % 2]
        flag = "1" if options.close_at_once else "0"
        ran = in_child(options.work, ["session", branch, flag], options.child_path)
        again = in_child(options.work, ["reopen"], options.child_path)
        rounds.append({"branch": branch, **ran, **again})
        print(
            f"checkout {branch:<10} refresh {ran['refresh_s']:5.2f} s ({ran['changed']} files),"
            f" background {ran['background_s']:5.2f} s | reopen {again['open_s']:5.2f} s,"
            f" {again['decoded']:5} rows decoded, peak RSS {again['rss_mb']:5} MB,"
            f" first refresh {again['first_refresh_s']:5.2f} s",
            flush=True,
        )
    if BRANCHES[(options.rounds - 1) % 2] != "main":
        subprocess.run(["git", "checkout", "--quiet", "--force", "main"], cwd=root, check=True)
    worst = max(r["open_s"] for r in rounds)
    print(
        f"reopen after a 1,000-file checkout: worst {worst:.2f} s (goal < {GOAL_S:.0f} s:"
        f" {'met' if worst < GOAL_S else 'not met'})"
    )
    if options.json:
        options.json.write_text(json.dumps({"rounds": rounds, "worst_open_s": worst}, indent=1))


if __name__ == "__main__":
    main()
