"""Classify replay results (run.py's JSON lines): one class per instance, with its evidence.

    python bench/replay/classify.py results.jsonl [--markdown] [--evidence 6]

Prints a table of the classes (count, and how many of them the original run resolved) with their
ids, then the evidence of every result that is not `identical`: the steps that explain each
differing file and the last lines of their output here. `--markdown` prints a summary for
docs/benchmarks.md instead. The classes are described in classify_rules.py; `kestrel-defect` is
what must go to zero.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from classify_enrich import enrich
from classify_rules import CLASSES, Verdict, classify, step_causes


def load_results(path: Path) -> list[dict[str, Any]]:
    """The result lines of a file, the last one per instance winning (a rerun replaces)."""
    latest: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}:{n} is not a JSON line") from None
        if not isinstance(row, dict) or "instance_id" not in row:
            raise ValueError(f"{path}:{n} is not a result line (no instance_id)")
        latest[str(row["instance_id"])] = row
    return list(latest.values())


def _grouped(verdicts: Iterable[Verdict]) -> dict[str, list[Verdict]]:
    groups: dict[str, list[Verdict]] = {}
    for v in sorted(verdicts, key=lambda v: (CLASSES.index(v.family), v.cls, v.instance_id)):
        groups.setdefault(v.cls, []).append(v)
    return groups


def text_report(rows: list[dict[str, Any]], verdicts: list[Verdict], evidence: int) -> str:
    """The table per class, then each non-identical result's evidence."""
    resolved = {str(r["instance_id"]) for r in rows if r.get("orig_resolved")}
    out = [f"{len(rows)} results, {len(resolved)} of them resolved by the original run", ""]
    out.append(f"{'class':28} {'n':>4} {'resolved':>8}  ids")
    for cls, group in _grouped(verdicts).items():
        ids = " ".join(v.instance_id for v in group)
        n_res = sum(1 for v in group if v.instance_id in resolved)
        out.append(f"{cls:28} {len(group):>4} {n_res:>8}  {ids}")
    for v in sorted(verdicts, key=lambda v: v.instance_id):
        if v.cls == "identical":
            continue
        out.append("")
        mark = "resolved" if v.instance_id in resolved else "not resolved"
        out.append(f"{v.instance_id} [{v.cls}] (original run {mark})")
        out += [f"  {line}" for line in v.evidence[:evidence]]
        if len(v.evidence) > evidence:
            out.append(f"  ... {len(v.evidence) - evidence} more")
    return "\n".join(out + session_notes(rows) + step_census(rows, show=40))


def session_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Which sessions met the loop detector, a blocking verification or a refusal, whatever
    their class (the acceptance wants no loop-detector stop at all)."""
    notes = {
        "loop-detector warnings": [
            r for r in rows if any(e.get("action") == "warn" for e in r.get("loop") or [])
        ],
        "loop-detector stops": [
            r for r in rows if any(e.get("action") == "stop" for e in r.get("loop") or [])
        ],
        "blocking verifications": [
            r for r in rows if any(v.get("blocking") for v in r.get("verify") or [])
        ],
        "refused calls": [r for r in rows if r.get("denied")],
    }
    return [""] + [
        f"{name}: {len(hit)} {' '.join(str(r['instance_id']) for r in hit)}".rstrip()
        for name, hit in notes.items()
    ]


def step_census(rows: list[dict[str, Any]], show: int) -> list[str]:
    """Diverged steps of all results counted by cause, then those with no known cause: whatever
    the tree, these are where a sandbox or Kestrel problem would show first."""
    counts: Counter[tuple[str, str]] = Counter()
    unexplained = []
    for r in rows:
        for step, cause, label in step_causes(r):
            counts[(cause, label.split(";")[0])] += 1
            if cause == "unexplained":
                unexplained.append((r["instance_id"], step, label))
    out = ["", f"diverged steps: {sum(counts.values())}"]
    out += [f"  {n:>5}  {cause}: {label}" for (cause, label), n in counts.most_common()]
    for iid, step, label in unexplained[:show]:
        last = " | ".join(str(step.get("tail") or step.get("head") or "").splitlines()[-2:])
        out.append(
            f"  unexplained: {iid} step {step['step']} rc {step['orig_rc']} -> "
            f"{step['replay_rc']} `{step['command'][:60]}` ({label}) {last[:160]}"
        )
    return out


def _for_markdown(text: str) -> str:
    """One table cell: no pipes or backticks, and absolute paths cut to their file names (a
    summary names no machine's folders)."""
    text = re.sub(r"(?<![\w.])/(?:[\w.+-]+/)+", "", text)
    return " ".join(text.replace("|", "/").replace("`", "'").split())


def markdown_report(rows: list[dict[str, Any]], verdicts: list[Verdict]) -> str:
    """A summary for docs/benchmarks.md: the class table, and each environment-caused or
    unexplained difference with its first piece of evidence."""
    resolved = {str(r["instance_id"]) for r in rows if r.get("orig_resolved")}
    out = [
        f"{len(rows)} trajectories replayed, {len(resolved)} of them resolved by the original run.",
        "",
        "| class | all | resolved | instances |",
        "|---|---|---|---|",
    ]
    for cls, group in _grouped(verdicts).items():
        n_res = sum(1 for v in group if v.instance_id in resolved)
        ids = ", ".join(v.instance_id for v in group) if cls != "identical" else "—"
        out.append(f"| {cls} | {len(group)} | {n_res} | {ids} |")
    out += [""] + [f"- {line}" for line in session_notes(rows) if line]
    listed = [v for v in verdicts if v.cls != "identical"]
    if listed:
        out += ["", "| instance | resolved | class | cause |", "|---|---|---|---|"]
    for v in sorted(listed, key=lambda v: v.instance_id):
        cause = _for_markdown("; ".join(v.evidence[:2]))
        mark = "yes" if v.instance_id in resolved else "no"
        out.append(f"| {v.instance_id} | {mark} | {v.cls} | {cause[:400]} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print the classification of a results file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--markdown", action="store_true", help="a summary for docs/benchmarks.md")
    ap.add_argument("--evidence", type=int, default=6, help="evidence lines per result")
    ap.add_argument("--runs-dir", type=Path, help="run.py's --runs-dir, to complete older lines")
    a = ap.parse_args(argv)
    try:
        rows = load_results(a.results)
    except (OSError, ValueError) as e:
        print(f"classify.py: {e}", file=sys.stderr)
        return 2
    if a.runs_dir is not None:
        rows = [enrich(r, a.runs_dir) for r in rows]
    verdicts = [classify(r) for r in rows]
    print(
        markdown_report(rows, verdicts) if a.markdown else text_report(rows, verdicts, a.evidence)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
