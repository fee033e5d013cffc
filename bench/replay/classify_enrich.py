"""Complete older result lines from their runs/<id>/ folder, so classify_rules can judge them.

Lines written before the harness recorded `path_producers` (and each diverged step's output tail)
carry `mismatch_paths` as "STATUS<TAB>path" strings. From runs/<id>/meta.json and events.jsonl this
recomputes the diverged steps with their output's ends and the steps that may have produced each
differing file. A line whose recorded patch could not be applied (a binary file without its full
blob ids) is compared file by file through the post-image blob ids of the two patches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from classify_rules import mark_own_scripts, output_differs, producers
from replay_events import diverged_steps, summarize
from replay_git import GENERATED, split_patch


def post_images(patch: str) -> dict[str, str]:
    """{path: abbreviated blob id after the patch} for each file section with an index line."""
    return {fp.path: fp.new_blob for fp in split_patch(patch) if fp.new_blob}


def _same_blob(a: str, b: str) -> bool:
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


def mismatches_by_blob(submission: str, replay: str) -> list[list[str]]:
    """[status, path] of the files whose post-image differs between the two patches."""
    want, got = post_images(submission), post_images(replay)
    out = []
    for path in sorted(set(want) | set(got)):
        if GENERATED.search(path):
            continue
        if path not in got:
            out.append(["D", path])
        elif path not in want:
            out.append(["A", path])
        elif not _same_blob(want[path], got[path]):
            out.append(["M", path])
    return out


def _read(run_dir: Path, name: str) -> str:
    try:
        return (run_dir / name).read_text()
    except OSError:
        return ""


def enrich(result: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    """The result with what classification needs, taken from its run folder where it lacks it."""
    if "path_producers" in result:
        return result
    run_dir = runs_dir / str(result.get("instance_id"))
    try:
        meta = json.loads(_read(run_dir, "meta.json"))
    except ValueError:
        return result  # nothing to add: the run never got that far
    out = dict(result)
    commands = [s["command"] for s in meta.get("steps", [])]
    events = summarize(_read(run_dir, "events.jsonl"))
    out["diverged_steps"] = diverged_steps(meta["steps"], events, output_differs)
    mark_own_scripts(out["diverged_steps"], commands)
    if out.get("status") == "expected_patch_does_not_apply":
        rows = mismatches_by_blob(meta.get("submission", ""), _read(run_dir, "replay.diff"))
        joined = "\n".join(commands)
        touched = post_images(_read(run_dir, "replay.diff"))
        out["status"] = "mismatch" if rows else "identical"
        out["env_preexisting_paths"] = [
            p for _, p in rows if p not in touched and os.path.basename(p) not in joined
        ]
    else:
        rows = [str(p).split("\t", 1) for p in out.get("mismatch_paths") or []]
    out["mismatch_paths"] = [r if len(r) == 2 else ["?", r[0]] for r in rows]
    pre = set(out.get("env_preexisting_paths") or [])
    out["path_producers"] = {
        p: producers(p, commands) for _, p in out["mismatch_paths"] if p not in pre
    }
    return out
