#!/usr/bin/env python3
"""The security gate on clean changes: the patches the original runs of the replay dev slice
submitted (mini-swe-agent driving Gemini 3 Pro on SWE-bench Verified; see bench/replay/README.md),
each applied to its repository at the base commit and scanned as `kestrel apply` and `kestrel pr`
scan a change: the lines it adds, by detect-secrets, the private-key check and bandit. Prints how
many changes and files were scanned, how many findings there were and how many would block, and
each finding (never a secret's value: the gate masks them).

An instance whose repository has no mirror here, or whose mirror lacks the base commit, cannot be
scanned whole: bandit needs each file's full new text. Its added lines are still known from the
patch, and they are all the secret scan reads (every other line is blank to it), so such an
instance gets the secret scan only, counted apart ("secret scan only").

    python bench/security_gate_clean.py --trajs TRAJ_GIT_DIR --mirror-root MIRRORS \\
        [--ids-file bench/replay/dev_ids.txt] [--instances bench/replay/instances_dev.json]

TRAJ_GIT_DIR is a clone (or bare git dir) of the trajectories' repository; MIRRORS holds each
project as `<owner>+<name>/repo` (`--mirror-override owner/name=GIT_DIR` for others). An instance
whose repository has no mirror here is counted as such, never guessed at. Nothing is written to
the mirrors: the patched tree is built with a scratch index and object folder.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "replay"))

from replay_data import (
    DataError,
    load_instances,
    load_trajectory,
    mirror_for,
    parse_overrides,
    read_ids,
)
from replay_git import split_patch

from kestrel.workspace.verify.changed_text import ChangedText, Collected, changed_text
from kestrel.workspace.verify.secrets_scan import secret_findings
from kestrel.workspace.verify.security import GateReport, scan

HERE = Path(__file__).resolve().parent
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class Totals:
    """What the whole run saw."""

    measured: int = 0
    secrets_only: int = 0
    secrets_only_files: int = 0
    files: int = 0
    python_files: int = 0
    added_lines: int = 0
    skipped_files: list[str] = field(default_factory=list)
    not_measured: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[tuple[str, str]] = field(default_factory=list)
    blocking: int = 0
    seconds: list[float] = field(default_factory=list)


def _git(git_dir: Path, env: dict[str, str], *args: str, stdin: bytes = b"") -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], input=stdin, env=env, capture_output=True
    )
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise DataError(f"git {args[0]}: {said[0] if said else done.returncode}")
    return done.stdout


def collect(git_dir: Path, base: str, patch: str) -> Collected:
    """The files the patch changes, applied on `base`, each with the lines it adds; a binary
    file (a patch may add one without the full blob ids `git apply` needs) is not scanned, as
    the gate scans no binary file."""
    sections = split_patch(patch)
    binary = [f"{section.path}: binary" for section in sections if section.binary]
    patch = "".join(section.text for section in sections if not section.binary)
    with tempfile.TemporaryDirectory(prefix="gate-clean-") as scratch:
        env = {
            **os.environ,
            "GIT_INDEX_FILE": str(Path(scratch) / "index"),
            "GIT_OBJECT_DIRECTORY": str(Path(scratch) / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"),
        }
        (Path(scratch) / "objects").mkdir()
        _git(git_dir, env, "read-tree", base)
        _git(git_dir, env, "apply", "--cached", "--binary", "-", stdin=patch.encode())
        tree = _git(git_dir, env, "write-tree").decode().strip()
        names = _git(git_dir, env, "diff", "--name-only", "-z", "--no-renames", base, tree)
        texts: list[ChangedText] = []
        skipped: list[str] = list(binary)
        for path in (p for p in names.decode().split("\0") if p):
            new = _blob(git_dir, env, tree, path)
            if new is None:
                continue  # deleted: nothing added
            found = changed_text(path, _blob(git_dir, env, base, path), new)
            if isinstance(found, str):
                skipped.append(found)
            else:
                texts.append(found)
    return Collected(tuple(texts), tuple(skipped))


def from_patch(patch: str) -> Collected:
    """The added lines of each file from the patch alone, at their line numbers in the new
    file, every other line blank: what the secret scan reads of a change."""
    texts: list[ChangedText] = []
    skipped: list[str] = []
    for section in split_patch(patch):
        if section.binary:
            skipped.append(f"{section.path}: binary")
            continue
        lines: dict[int, str] = {}
        added: set[int] = set()
        number = 0
        for line in section.text.splitlines():
            hunk = _HUNK.match(line)
            if hunk:
                number = int(hunk.group(1))
            elif number and line.startswith(("+", " ")) and not line.startswith("+++"):
                lines[number] = line[1:]
                if line.startswith("+"):
                    added.add(number)
                number += 1
        if added:
            rows = tuple(lines.get(n, "") for n in range(1, max(lines) + 1))
            texts.append(ChangedText(section.path, rows, frozenset(added)))
    return Collected(tuple(texts), tuple(skipped))


def _blob(git_dir: Path, env: dict[str, str], rev: str, path: str) -> bytes | None:
    try:
        return _git(git_dir, env, "cat-file", "blob", f"{rev}:{path}")
    except DataError:
        return None


def measure_one(iid: str, args: argparse.Namespace, totals: Totals) -> None:
    """Scan one instance's submitted patch, adding to `totals`."""
    instance = args.instances_map[iid]
    trajectory, _ = load_trajectory(args.trajs, iid, args.trajs_rev)
    info = trajectory.get("info", {}) if isinstance(trajectory, dict) else {}
    patch = str(info.get("submission") or "")
    if not patch.strip():
        totals.not_measured["no submitted patch"] += 1
        return
    git_dir = mirror_for(instance.repo, args.mirror_root, args.overrides)
    whole = (git_dir / "objects").is_dir() and _has_commit(git_dir, instance.base_commit)
    if not whole:
        totals.not_measured[f"no mirror of {instance.repo} (secret scan only)"] += 1
        from_lines = from_patch(patch)
        _tally(iid, from_lines, scan(from_lines, {"secrets": secret_findings}), totals)
        totals.secrets_only += 1
        totals.secrets_only_files += len(from_lines.texts)
        return
    try:
        collected = collect(git_dir, instance.base_commit, patch)
    except DataError as exc:
        totals.not_measured[f"the patch does not apply ({exc})"] += 1
        return
    started = time.perf_counter()
    report: GateReport = scan(collected)
    totals.seconds.append(time.perf_counter() - started)
    totals.measured += 1
    _tally(iid, collected, report, totals)


def _has_commit(git_dir: Path, sha: str) -> bool:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{sha}^{{commit}}"],
        capture_output=True,
    )
    return done.returncode == 0


def _tally(iid: str, collected: Collected, report: GateReport, totals: Totals) -> None:
    totals.files += len(collected.texts)
    totals.python_files += sum(text.python for text in collected.texts)
    totals.added_lines += sum(len(text.added) for text in collected.texts)
    totals.skipped_files += [f"{iid}: {why}" for why in collected.skipped]
    totals.blocking += len(report.blocking)
    for finding in report.findings:
        f = finding.failure
        verdict = "BLOCKS" if finding.blocking else "reported"
        line = f"{iid} {f.file}:{f.line or ''} [{f.tool} {f.code or ''}] {verdict}: {f.message}"
        totals.findings.append((f"{f.tool} {f.code or ''}".strip(), line))


def report(totals: Totals, slice_size: int) -> None:
    """Print the figures."""
    print(
        f"changes in the slice: {slice_size}; scanned whole: {totals.measured}; "
        f"secret scan only: {totals.secrets_only}"
    )
    for why, count in sorted(totals.not_measured.items()):
        print(f"  not whole: {count} ({why})")
    whole = totals.files - totals.secrets_only_files
    print(
        f"files scanned: {totals.files} ({whole} whole, {totals.secrets_only_files} secret scan "
        f"only; {totals.python_files} Python), lines added: {totals.added_lines}, "
        f"files not scanned: {len(totals.skipped_files)}"
    )
    blocking = totals.blocking
    print(
        f"findings: {len(totals.findings)} (blocking: {blocking}, "
        f"reported only: {len(totals.findings) - blocking})"
    )
    for kind, count in collections.Counter(k for k, _ in totals.findings).most_common():
        print(f"  {kind}: {count}")
    for _, line in totals.findings:
        print(f"  {line}")
    for line in totals.skipped_files:
        print(f"  not scanned: {line}")
    if totals.seconds:
        ms = sorted(s * 1000 for s in totals.seconds)
        print(
            f"gate time per change: p50 {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms, "
            f"all {sum(ms) / 1000:.1f} s"
        )


def main() -> int:
    """Run over the slice and print the figures; 2 for unusable input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajs", type=Path, required=True)
    parser.add_argument("--trajs-rev", default="HEAD")
    parser.add_argument("--mirror-root", type=Path)
    parser.add_argument("--mirror-override", action="append", default=[])
    parser.add_argument("--ids-file", type=Path, default=HERE / "replay" / "dev_ids.txt")
    parser.add_argument("--instances", type=Path, default=HERE / "replay" / "instances_dev.json")
    args = parser.parse_args()
    try:
        args.overrides = parse_overrides(args.mirror_override)
        args.instances_map = load_instances(args.instances)
        ids = read_ids([], args.ids_file)
        totals = Totals()
        for iid in ids:
            if iid not in args.instances_map:
                totals.not_measured["not in the instances file"] += 1
                continue
            measure_one(iid, args, totals)
    except DataError as exc:
        print(f"security_gate_clean: {exc}", file=sys.stderr)
        return 2
    report(totals, len(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
