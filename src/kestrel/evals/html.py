"""HTML pages for evaluations and sessions: the run report and each task's trajectory.

`render_run_report` turns a run's `run.json` and `results.jsonl` lines into one self-contained
page (headline figures, inline SVG plots, a per-task table); `write_run_report` writes it into the
run folder as `report.html`, next to `trajectories/<instance_id>.html`, one page per task whose
session log it finds. `render_trajectory` renders any session's log.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kestrel.evals.html_page import DASH, Markup, Node, count, money, page, seconds, tag, when
from kestrel.evals.html_plots import histogram, share_bar
from kestrel.evals.html_trajectory import render_trajectory
from kestrel.evals.results import RunFolder
from kestrel.protocol.codec import DecodeError, record_from_json
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.protocol.events import Record
from kestrel.protocol.oserrors import error_text
from kestrel.store import SQLiteStore, StoreError

REPORT_FILE = "report.html"
TRAJECTORIES_DIR = "trajectories"

_STATUSES = (
    ("resolved", "resolved", "#2da44e", "ok"),
    ("unresolved", "unresolved", "#cf222e", "bad"),
    ("budget_exhausted", "budget exhausted", "#d4a72c", "warn"),
    ("error", "error", "#8c959f", "bad"),
)


class ReportError(ConfigError):
    """A run folder or a session log cannot be read for a report."""


def render_run_report(
    run: Mapping[str, Any],
    tasks: Sequence[Mapping[str, Any]],
    *,
    links: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The evaluation report page; missing values show as a dash.

    `links` maps instance ids to their trajectory pages; by default every task with a
    `session_dir` links to `trajectories/<instance_id>.html`.
    """
    if links is None:
        links = {
            str(t["instance_id"]): TRAJECTORIES_DIR + "/" + quote(trajectory_file_name(t))
            for t in tasks
            if (t.get("session_dir") or t.get("events_file")) and t.get("instance_id") is not None
        }
    ordered = sorted(tasks, key=lambda t: str(t.get("instance_id", "")))
    title = f"Kestrel evaluation: {run.get('suite', 'run')} · {run.get('model', '')}".rstrip(" ·")
    body: list[Node] = [
        tag("h1", title),
        _run_meta(run, tasks),
        tag("h2", "Headline figures"),
        _figures(tasks),
        tag("h2", "Plots"),
        _plots(tasks),
        tag("h2", "Tasks"),
        _table(ordered, links),
    ]
    if notes:
        body += [tag("h2", "Notes"), tag("ul", [tag("li", n) for n in notes])]
    return page(title, [tag("main", body)], extra_css=REPORT_CSS)


def _num(task: Mapping[str, Any], key: str) -> float | None:
    value = task.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _values(tasks: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [v for v in (_num(t, key) for t in tasks) if v is not None]


def _total(values: Sequence[float]) -> str:
    return count(sum(values)) if values else DASH


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.0f}%"


def _run_ids(run: Mapping[str, Any]) -> list[str]:
    for key in ("task_ids", "instance_ids", "instances", "tasks"):
        value = run.get(key)
        if isinstance(value, list):
            return [str(v) for v in value]
    return []


def _run_meta(run: Mapping[str, Any], tasks: Sequence[Mapping[str, Any]]) -> Markup:
    planned = _run_ids(run)
    done = {str(t.get("instance_id")) for t in tasks}
    pending = [i for i in planned if i not in done]
    rows: list[tuple[str, Node]] = [
        ("suite", str(run.get("suite", DASH))),
        ("model", str(run.get("model", DASH))),
        ("run", str(run.get("run_id", DASH))),
        ("started", when(run.get("started"))),
        ("finished", when(run.get("finished")) if run.get("finished") else "not finished"),
        ("tasks", f"{len(tasks)} with results" + (f" of {len(planned)}" if planned else "")),
    ]
    if pending:
        rows.append(("pending", ", ".join(pending)))
    settings = run.get("settings")
    if isinstance(settings, Mapping) and settings:
        shown = [
            tag("div", tag("code", k), " = ", json.dumps(v, ensure_ascii=False, default=str))
            for k, v in settings.items()
        ]
        rows.append(("settings", shown))
    return tag(
        "table",
        [tag("tr", tag("th", k), tag("td", v)) for k, v in rows],
        class_="meta",
        data_section="run",
    )


def _figures(tasks: Sequence[Mapping[str, Any]]) -> Markup:
    n = len(tasks)
    resolved = sum(1 for t in tasks if t.get("resolved") is True)
    by_status = {key: sum(1 for t in tasks if t.get("status") == key) for key, *_ in _STATUSES}
    costs, turns = _values(tasks, "cost_usd"), _values(tasks, "turns")
    tokens = [
        (_num(t, "input_tokens") or 0) + (_num(t, "output_tokens") or 0)
        for t in tasks
        if _num(t, "input_tokens") is not None or _num(t, "output_tokens") is not None
    ]
    items: list[tuple[str, str]] = [
        ("resolved", f"{resolved} / {n}" + (f" ({100 * resolved / n:.0f}%)" if n else "")),
        ("unresolved", str(by_status["unresolved"])),
        ("budget exhausted", str(by_status["budget_exhausted"])),
        ("errors", str(by_status["error"])),
        ("total cost", money(sum(costs)) if costs else DASH),
        ("mean cost per task", money(_mean(costs))),
        ("median turns", count(statistics.median(turns)) if turns else DASH),
        ("mean tool calls", count(_mean([c for c in map(_calls, tasks) if c is not None]))),
        ("tokens (in + out)", count(sum(tokens)) if tokens else DASH),
        ("cache read tokens", _total(_values(tasks, "cache_read_tokens"))),
        ("mean wall time", seconds(_mean(_values(tasks, "wall_s")))),
        ("edit-apply success", _pct(_mean(_values(tasks, "edit_apply_success")))),
        ("localisation recall", _pct(_mean(_values(tasks, "loc_recall")))),
        ("token efficiency", _pct(_mean(_values(tasks, "token_efficiency")))),
    ]
    cards = [
        tag("div", tag("div", v, class_="value"), tag("div", k, class_="label"), class_="figure")
        for k, v in items
    ]
    return tag("div", cards, class_="figures", data_section="figures")


def _calls(task: Mapping[str, Any]) -> float | None:
    kinds = task.get("tool_calls")
    if isinstance(kinds, Mapping):
        return float(sum(v for v in kinds.values() if isinstance(v, int | float)))
    return _num(task, "tool_calls")


def _plots(tasks: Sequence[Mapping[str, Any]]) -> Markup:
    shares = [
        (label, sum(1 for t in tasks if t.get("status") == key), colour)
        for key, label, colour, _ in _STATUSES
    ]
    known = {key for key, *_ in _STATUSES}
    other = sum(1 for t in tasks if t.get("status") not in known)
    if other:
        shares.append(("unknown status", other, "#c9ccd1"))
    return tag(
        "div",
        share_bar(shares, kind="resolved", caption="Resolved rate"),
        histogram(
            _values(tasks, "cost_usd"), kind="cost", caption="Cost per task", fmt=_short_money
        ),
        histogram(
            _values(tasks, "turns"), kind="turns", caption="Turns per task", fmt=str, integer=True
        ),
        class_="plots",
    )


def _short_money(value: float) -> str:
    return f"${value:.2g}" if value < 1 else f"${value:.2f}"


_COLUMNS = (
    ("task", ""),
    ("status", ""),
    ("turns", "num"),
    ("tool calls", "num"),
    ("edit apply", "num"),
    ("loc. precision", "num"),
    ("loc. recall", "num"),
    ("files read / edited / gold", "num"),
    ("input tok.", "num"),
    ("output tok.", "num"),
    ("cache read", "num"),
    ("cost", "num"),
    ("wall", "num"),
    ("retries", "num"),
    ("verify rounds", "num"),
    ("loops", "num"),
    ("compactions", "num"),
    ("token eff.", "num"),
    ("tests", ""),
)


def _table(tasks: Sequence[Mapping[str, Any]], links: Mapping[str, str]) -> Markup:
    head = tag("tr", [tag("th", name, class_=css or None) for name, css in _COLUMNS])
    rows = [_row(t, links) for t in tasks]
    if not rows:
        rows = [tag("tr", tag("td", "no task has finished yet", colspan=len(_COLUMNS)))]
    table = tag("table", tag("thead", head), tag("tbody", rows), class_="tasks")
    return tag("div", table, class_="scroll", data_section="tasks")


def _row(t: Mapping[str, Any], links: Mapping[str, str]) -> Markup:
    iid = str(t.get("instance_id", DASH))
    href = links.get(iid)
    name: Node = tag("a", iid, href=href) if href else iid
    status = str(t.get("status", DASH))
    css = next((c for key, _, _, c in _STATUSES if key == status), "")
    error = t.get("error")
    kinds = t.get("tool_calls")
    calls_title = (
        ", ".join(f"{k}: {v}" for k, v in kinds.items()) if isinstance(kinds, Mapping) else None
    )
    cells: list[Node] = [
        tag("td", name, class_="task-id"),
        tag(
            "td",
            tag("span", status.replace("_", " "), class_=f"badge {css}"),
            tag("div", str(error), class_="error") if error else None,
        ),
        _cell(count(_num(t, "turns"))),
        _cell(count(_calls(t)), title=calls_title),
        _cell(_pct(_num(t, "edit_apply_success"))),
        _cell(_pct(_num(t, "loc_precision"))),
        _cell(_pct(_num(t, "loc_recall"))),
        _files_cell(t),
        _cell(count(_num(t, "input_tokens"))),
        _cell(count(_num(t, "output_tokens"))),
        _cell(count(_num(t, "cache_read_tokens"))),
        _cell(money(_num(t, "cost_usd"))),
        _cell(seconds(_num(t, "wall_s"))),
        _cell(count(_num(t, "retries"))),
        _cell(count(_num(t, "verify_rounds"))),
        _cell(count(_num(t, "loops"))),
        _cell(count(_num(t, "compactions"))),
        _cell(_pct(_num(t, "token_efficiency"))),
        tag("td", _brief(t.get("tests")), class_="tests"),
    ]
    return tag("tr", cells, data_instance=iid, data_status=status)


def _cell(text: str, *, title: str | None = None) -> Markup:
    return tag("td", text, class_="num", title=title)


def _files_cell(t: Mapping[str, Any]) -> Markup:
    groups = [t.get(k) for k in ("files_read", "files_edited", "gold_files")]
    sizes = [str(len(g)) if isinstance(g, list) else DASH for g in groups]
    title = "\n".join(
        f"{label}: {', '.join(map(str, g))}"
        for label, g in zip(("read", "edited", "gold"), groups, strict=True)
        if isinstance(g, list) and g
    )
    return _cell(" / ".join(sizes), title=title or None)


def _brief(value: object) -> Node:
    """The `tests` field: `{test: outcome}` as "2 of 3 pass" with the list folded; else as is."""
    if value is None or value == {}:
        return DASH
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        passed = sum(1 for v in value.values() if v == "pass")
        items = [tag("li", tag("code", k), f": {v}") for k, v in value.items()]
        summary = f"{passed} of {len(value)} pass"
        return tag("details", tag("summary", summary), tag("ul", items))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= 80:
        return tag("code", text)
    return tag("details", tag("summary", text[:60] + "…"), tag("pre", text))


def trajectory_file_name(task: Mapping[str, Any] | str) -> str:
    """`<instance_id>.html`, with characters unsafe in a file name replaced by `_`."""
    iid = task if isinstance(task, str) else str(task.get("instance_id", "task"))
    cleaned = "".join(ch if ch.isalnum() or ch in "-_.+" else "_" for ch in iid).strip(".")
    return (cleaned or "_") + ".html"


def load_session_records(where: Path, session_id: str | None = None) -> list[Record]:
    """A session's records from a log export (`*.jsonl`) or an event store (`*.db`).

    `where` is such a file, or a folder holding one (an event store may sit up to three levels
    down, as in a data directory). Raises `ReportError` when no log of the session is found.
    """
    files = [where] if where.is_file() else _log_files(where)
    for path in files:
        records = _read_db(path, session_id) if path.suffix == ".db" else _read_jsonl(path)
        if session_id:
            records = [r for r in records if r.session_id == session_id]
        if records:
            return records
    wanted = f"session {session_id}" if session_id else "a session"
    raise ReportError(f"{where}: no log of {wanted} found (looked for *.jsonl and *.db)")


def _log_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such file or folder")
    exports = sorted(folder.glob("*.jsonl"))
    stores = sorted(
        p for depth in ("*.db", "*/*.db", "*/*/*.db", "*/*/*/*.db") for p in folder.glob(depth)
    )
    return exports + stores


def _read_jsonl(path: Path) -> list[Record]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read it: {error_text(exc)}") from exc
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(record_from_json(line))
        except DecodeError:
            continue  # Not a record: another JSON Lines file, or a line cut short.
    return records


def _read_db(path: Path, session_id: str | None) -> list[Record]:
    try:
        store = SQLiteStore(path)
    except (StoreError, OSError) as exc:
        raise ReportError(f"{path}: cannot open the event store: {exc}") from exc
    try:
        if session_id:
            return list(store.read(store.resolve(session_id)))
        sessions = store.sessions()
        if len(sessions) != 1:
            return []
        return list(store.read(sessions[0].session_id))
    except SessionNotFound:
        return []
    except (StoreError, DecodeError) as exc:
        raise ReportError(f"{path}: cannot read the event store: {exc}") from exc
    finally:
        store.close()


def write_run_report(run_dir: Path) -> Path:
    """Write `report.html` and the tasks' trajectory pages into the run folder; return its path."""
    folder = RunFolder(run_dir)
    run = folder.read_run()
    # A task rerun after its result was written (by hand, say): its latest line counts.
    tasks = list({str(task["instance_id"]): task for task in folder.results()}.values())
    links: dict[str, str] = {}
    notes: list[str] = []
    for task in tasks:
        iid = str(task["instance_id"])
        where = _session_path(run_dir, task.get("events_file"))
        if where is None or not where.is_file():
            where = _session_path(run_dir, task.get("session_dir"))
        if where is None:
            continue
        sid = task.get("session_id")
        try:
            records = load_session_records(where, sid if isinstance(sid, str) else None)
        except ReportError as exc:
            notes.append(f"{iid}: no trajectory page: {exc}")
            continue
        name = trajectory_file_name(iid)
        html = render_trajectory(records, title=f"{iid}: trajectory", back_href="../" + REPORT_FILE)
        _write(run_dir / TRAJECTORIES_DIR / name, html)
        links[iid] = TRAJECTORIES_DIR + "/" + quote(name)
    report = run_dir / REPORT_FILE
    _write(report, render_run_report(run, tasks, links=links, notes=notes))
    return report


def _session_path(run_dir: Path, value: object) -> Path | None:
    if not isinstance(value, str) or not value:
        return None
    path = Path(value)
    if not path.is_absolute() and (run_dir / path).exists():
        return run_dir / path
    return path


def _write(path: Path, text: str) -> None:
    """Replace the file whole: a reader never sees half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


REPORT_CSS = """
table.meta { width:auto; margin:8px 0; border:1px solid var(--line); border-radius:8px; }
table.meta th { width:1%; white-space:nowrap; }
table.tasks td.task-id { font-family:var(--mono); font-size:12.5px; white-space:nowrap; }
table.tasks tbody tr:hover { background:#f7f9fc; }
td.tests { white-space:nowrap; }
td.tests code { font-size:11.5px; }
td.tests ul { margin:4px 0; padding-left:16px; white-space:nowrap; }
td .error { color:var(--bad); font-size:12px; max-width:260px; }
"""

__all__ = [
    "REPORT_FILE",
    "TRAJECTORIES_DIR",
    "ReportError",
    "load_session_records",
    "render_run_report",
    "render_trajectory",
    "trajectory_file_name",
    "write_run_report",
]
