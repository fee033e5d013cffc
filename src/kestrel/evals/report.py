"""Summaries of a run's results, as Markdown, and the comparison of two runs."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kestrel.evals.results import STATUSES

NUMERIC = (
    "turns",
    "edit_apply_success",
    "loc_precision",
    "loc_recall",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cost_usd",
    "wall_s",
    "retries",
    "verify_rounds",
    "loops",
    "compactions",
    "token_efficiency",
)
"""Per-task metrics that are numbers (or null), in the order reports show them."""

Result = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """A run's figures over all its finished tasks."""

    tasks: int
    resolved: int
    statuses: dict[str, int]
    means: dict[str, float | None]
    """The mean of each numeric metric over the tasks that have a value for it."""
    total_cost_usd: float
    total_tokens: int

    @property
    def resolved_rate(self) -> float:
        """Resolved tasks over finished tasks (0 for none)."""
        return self.resolved / self.tasks if self.tasks else 0.0


def summarize(results: Sequence[Result]) -> Summary:
    """The run-level figures."""
    statuses = Counter(str(r.get("status")) for r in results)
    return Summary(
        tasks=len(results),
        resolved=sum(1 for r in results if r.get("resolved")),
        statuses={s: statuses.get(s, 0) for s in STATUSES},
        means={key: _mean(r.get(key) for r in results) for key in NUMERIC},
        total_cost_usd=sum(float(r.get("cost_usd") or 0) for r in results),
        total_tokens=sum(
            int(r.get(k) or 0)
            for r in results
            for k in ("input_tokens", "output_tokens", "cache_read_tokens")
        ),
    )


def _mean(values: Any) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.fmean(numbers) if numbers else None


def fmt(value: Any) -> str:
    """A metric as a table shows it."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _cell(value: Any) -> str:
    return fmt(value).replace("|", "\\|").replace("\n", " ")


def markdown(run: Mapping[str, Any], results: Sequence[Result]) -> str:
    """The Markdown report of one run."""
    summary = summarize(results)
    expected = len(run.get("task_ids") or []) or summary.tasks
    lines = [
        f"# Evaluation run {run.get('run_id', '')}",
        "",
        f"- Suite: `{run.get('suite', '')}`",
        f"- Model: `{run.get('model', '')}`",
        f"- Started: {run.get('started') or '-'}; finished: {run.get('finished') or 'not yet'}",
        f"- Tasks finished: {summary.tasks} of {expected}",
        f"- Resolved: {summary.resolved} ({summary.resolved_rate:.1%})",
        "- Status: " + ", ".join(f"{k} {v}" for k, v in summary.statuses.items()),
        f"- Total cost: ${summary.total_cost_usd:.4f}; total tokens: {summary.total_tokens}",
    ]
    if str(run.get("model", "")).startswith("scripted:"):
        lines.append("- The model is SCRIPTED: it replays a fixed script; no real model ran.")
    lines += ["", "## Means over tasks", "", "| metric | mean |", "|---|---|"]
    lines += [f"| {key} | {_cell(value)} |" for key, value in summary.means.items()]
    columns = ("status", "turns", "tool_calls", "edit_apply_success", "loc_precision",
               "loc_recall", "cost_usd", "wall_s", "token_efficiency")  # fmt: skip
    lines += ["", "## Tasks", "", "| task | " + " | ".join(columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")
    for r in results:
        cells = [_cell(r.get("instance_id"))] + [_cell(r.get(c)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    failing = [r for r in results if r.get("error")]
    if failing:
        lines += ["", "## Errors", ""]
        lines += [f"- {r['instance_id']}: {_cell(r['error'])}" for r in failing]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDiff:
    """How one task differs between two runs."""

    instance_id: str
    status_a: str | None
    status_b: str | None
    moved: dict[str, tuple[Any, Any]]
    """Metrics whose value differs: name -> (value in A, value in B); wall time, which always
    differs a little, is compared only over the whole run."""


def compare(a: Sequence[Result], b: Sequence[Result]) -> list[TaskDiff]:
    """Per-task differences, for every task in either run (in A's order, then B's new ones)."""
    by_a = {str(r["instance_id"]): r for r in a}
    by_b = {str(r["instance_id"]): r for r in b}
    diffs = []
    for task in [*by_a, *(t for t in by_b if t not in by_a)]:
        ra, rb = by_a.get(task, {}), by_b.get(task, {})
        moved = {
            key: (ra.get(key), rb.get(key))
            for key in ("resolved", *NUMERIC, "tool_calls")
            if key != "wall_s" and ra and rb and ra.get(key) != rb.get(key)
        }
        diffs.append(
            TaskDiff(
                instance_id=task,
                status_a=ra.get("status") if ra else None,
                status_b=rb.get("status") if rb else None,
                moved=moved,
            )
        )
    return diffs


def compare_markdown(
    run_a: Mapping[str, Any], a: Sequence[Result], run_b: Mapping[str, Any], b: Sequence[Result]
) -> str:
    """The comparison of two runs as Markdown: run-level figures, then each task that moved."""
    sa, sb = summarize(a), summarize(b)
    name_a, name_b = run_a.get("run_id", "A"), run_b.get("run_id", "B")
    lines = [
        f"# {name_a} vs {name_b}",
        "",
        f"| metric | {name_a} | {name_b} |",
        "|---|---|---|",
        f"| model | `{run_a.get('model', '')}` | `{run_b.get('model', '')}` |",
        f"| resolved | {sa.resolved}/{sa.tasks} | {sb.resolved}/{sb.tasks} |",
        f"| total cost | ${sa.total_cost_usd:.4f} | ${sb.total_cost_usd:.4f} |",
    ]
    lines += [f"| mean {k} | {_cell(sa.means[k])} | {_cell(sb.means[k])} |" for k in NUMERIC]
    lines += ["", "## Tasks", ""]
    diffs = compare(a, b)
    changed = [d for d in diffs if d.moved or d.status_a != d.status_b]
    for d in changed:
        lines.append(f"- **{d.instance_id}**: {d.status_a or 'absent'} → {d.status_b or 'absent'}")
        lines += [f"  - {key}: {_cell(va)} → {_cell(vb)}" for key, (va, vb) in d.moved.items()]
    unchanged = len(diffs) - len(changed)
    lines.append(f"\n{len(changed)} task(s) differ; {unchanged} unchanged.")
    return "\n".join(lines) + "\n"
