"""The evaluation report page and the run folder it is written into, from a real session log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_kit import HOSTILE, ScriptedSession, make_run, task_result

from kestrel.evals.html import (
    ReportError,
    load_session_records,
    render_run_report,
    trajectory_file_name,
    write_run_report,
)
from kestrel.evals.html_page import DASH
from kestrel.evals.results import RunError


def _rows(page: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-instance="([^"]+)" data-status="([^"]+)"', page))


def test_report_shows_figures_plots_and_one_row_per_task(
    session: ScriptedSession, tmp_path: Path
) -> None:
    report = write_run_report(make_run(tmp_path, session))
    page = report.read_text()
    assert report == tmp_path / "run-1" / "report.html"
    # The half-written last line of results.jsonl is left out; that task is still pending.
    assert _rows(page) == {
        "calc__calc-1": "resolved",
        "calc__calc-2": "unresolved",
        "strings__strings-1": "budget_exhausted",
        "dates__dates-0": "error",
    }
    assert "4 with results of 5" in page and "<td>dates__dates-1</td>" in page  # pending
    assert "1 / 4 (25%)" in page  # resolved
    assert "$0.3287" in page  # total cost: 0 + 0.0412 + 0.2875
    assert "$0.1096" in page  # mean cost of the three tasks that report one
    assert "setup command &#x27;make&#x27; exited 2" in page
    assert "<summary>2 of 2 pass</summary>" in page and "<summary>1 of 2 pass</summary>" in page
    assert '<div class="value">14</div><div class="label">median turns' in page
    assert page.count("<svg") == 3
    assert {"resolved", "cost", "turns"} == set(re.findall(r'data-plot="([a-z-]+)"', page))
    # Missing metrics show as a dash, not as zero.
    budget_row = page.split('data-instance="strings__strings-1"')[1].split("</tr>")[0]
    assert budget_row.count(f">{DASH}<") == 14 and "$0.2875" in budget_row


def test_each_task_with_a_log_gets_its_trajectory_page(
    session: ScriptedSession, tmp_path: Path
) -> None:
    run_dir = make_run(tmp_path, session)
    page = write_run_report(run_dir).read_text()
    assert 'href="trajectories/calc__calc-1.html"' in page
    trajectory = (run_dir / "trajectories" / "calc__calc-1.html").read_text()
    assert "calc__calc-1: trajectory" in trajectory and 'href="../report.html"' in trajectory
    assert "return a + b" in trajectory and "Fixed: add now adds." in trajectory
    assert "<script" not in trajectory and "&lt;script&gt;alert(" in trajectory
    # The task whose log is gone has no link, and the report says why.
    assert not (run_dir / "trajectories" / "calc__calc-2.html").exists()
    assert "calc__calc-2: no trajectory page" in page
    assert sorted(p.name for p in (run_dir / "trajectories").iterdir()) == ["calc__calc-1.html"]


def test_session_logs_are_found_in_an_export_or_an_event_store(session: ScriptedSession) -> None:
    data_dir = Path(session.env.vars["KESTREL_DATA_DIR"])
    from_store = load_session_records(data_dir.parent, session.session_id)
    assert [r.seq for r in from_store] == [r["seq"] for r in session.records]
    assert from_store[0].event.type == "session_started"
    with pytest.raises(ReportError, match="no log of session nope"):
        load_session_records(data_dir, "nope")
    with pytest.raises(ReportError, match="no such file or folder"):
        load_session_records(data_dir / "absent")


def test_report_without_run_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"not a run folder \(no run.json\)"):
        write_run_report(tmp_path)
    (tmp_path / "run.json").write_text("[1, 2")
    with pytest.raises(RunError, match=r"run\.json: cannot read it"):
        write_run_report(tmp_path)


def test_a_run_without_results_yet_still_renders(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"suite": "s", "task_ids": ["a"]}))
    page = write_run_report(tmp_path).read_text()
    assert "no task has finished yet" in page and "0 / 0" in page and "no data" in page


def test_report_escapes_what_the_results_hold() -> None:
    evil = task_result(HOSTILE, "resolved", session_dir="x", tests=HOSTILE, turns="many")
    page = render_run_report({"suite": HOSTILE, "settings": {HOSTILE: HOSTILE}}, [evil])
    assert "<script" not in page
    assert page.count("&lt;script&gt;") >= 4
    # A task id becomes a file name without path separators or markup.
    assert trajectory_file_name(evil) == "_script_alert__from_the_log____script_.html"
    assert 'href="trajectories/_script_alert__from_the_log____script_.html"' in page
