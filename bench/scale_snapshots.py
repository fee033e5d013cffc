"""Older snapshots of every repository, for `bench/index_scale.py --ages`: a monorepo-sized tree
(250,000 files and more) made of real code, several versions of each repository side by side.

Each age (in years before the repository's HEAD) adds, repository by repository, the newest
first-parent commit at least that old as `<name>-<age>y/`, until the tree holds `target` files.
A repository with no commit that old is skipped for that age.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Export = Callable[[Path, str, Path], int]
OldCommit = Callable[[Path, int], str]
Count = Callable[[Path], int]


def older_snapshots(
    plan: Sequence[dict[str, str]],
    combined: Path,
    have: int,
    target: int,
    ages: Sequence[int],
    *,
    export: Export,
    old_commit: OldCommit,
    count: Count,
) -> list[dict[str, Any]]:
    """Export older snapshots while the tree holds fewer than `target` files (`have` now)."""
    added: list[dict[str, Any]] = []
    for age in ages:
        for source in plan:
            if have >= target:
                return added
            bare = Path(source["bare"])
            try:
                commit = old_commit(bare, age)
            except SystemExit:
                continue  # no commit that old
            name = f"{source['name']}-{age}y"
            print(f"{have} files < {target}: adding {name} at {commit[:10]} ...", flush=True)
            lacked = export(bare, commit, combined / name)
            have += count(combined / name)
            added.append({**source, "name": name, "commit": commit, "missing_blobs": lacked})
    if have < target:
        print(f"warning: {have} files < --target-files {target} after every age given")
    return added
