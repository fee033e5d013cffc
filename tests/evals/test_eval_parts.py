"""The pure parts of the harness: task files, test output, metrics over a log, the run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evals_kit import build_suite, isolated_env
from typer.testing import CliRunner

from kestrel.cli.eval_cmd import app as eval_app
from kestrel.evals.metrics import compute
from kestrel.evals.results import RunFolder
from kestrel.evals.tasks import SuiteError, load_suite, parse_task, patch_files, select
from kestrel.evals.testrun import command_for, outcomes
from kestrel.protocol.events import (
    FileChanged,
    LoopDetected,
    ModelCompleted,
    ModelRetrying,
    Record,
    SessionFinished,
    SessionStarted,
    ToolCallRequested,
    ToolFinished,
    VerificationFinished,
)
from kestrel.protocol.messages import AssistantTurn, ToolCall, Usage

LINE = {
    "instance_id": "a__b-1",
    "repo": "a/b",
    "base_commit": "abc123",
    "problem_statement": "It breaks.",
    "FAIL_TO_PASS": '["t.py::test_x"]',
    "PASS_TO_PASS": "[]",
    "patch": "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n"
    "diff --git a/new.py b/new.py\n",
}


def test_a_swe_bench_line_becomes_a_task() -> None:
    task = parse_task(LINE)
    assert task.fail_to_pass == ("t.py::test_x",)  # Given as JSON text, as SWE-bench does.
    assert task.pass_to_pass == () and task.tests == ("t.py::test_x",)
    assert task.gold_files == ("src/m.py", "new.py")  # From the reference patch's file names.
    assert task.test_cmd is None and task.setup == () and task.repo_path is None


def test_patch_files_names_deleted_files_by_their_old_name() -> None:
    assert patch_files("diff --git a/gone.py b/gone.py\n") == ["gone.py"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json\n", "line 1: not valid JSON"),
        ('{"instance_id": "x"}\n', "line 1: missing or empty repo, base_commit, problem_statement"),
        (json.dumps({**LINE, "FAIL_TO_PASS": "[oops"}) + "\n", "'FAIL_TO_PASS' is a string but"),
        (json.dumps(LINE) + "\n" + json.dumps(LINE) + "\n", "line 2: instance 'a__b-1' appears"),
        ("\n", "the suite holds no tasks"),
    ],
)
def test_malformed_suites_are_named_by_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    suite = tmp_path / "suite.jsonl"
    suite.write_text(text)
    with pytest.raises(SuiteError, match=r"suite\.jsonl") as caught:
        load_suite(suite)
    assert message in str(caught.value)


def test_unknown_instances_are_refused() -> None:
    with pytest.raises(SuiteError, match=r"unknown instance\(s\): nope"):
        select([parse_task(LINE)], ["nope"])


def test_pytest_and_unittest_outcomes_are_read() -> None:
    pytest_out = (
        "PASSED t.py::test_a\nFAILED t.py::test_b - AssertionError: 1 != 2\nERROR t.py::test_c\n"
    )
    assert outcomes(pytest_out, ["t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::d"]) == {
        "t.py::test_a": "pass",
        "t.py::test_b": "fail",
        "t.py::test_c": "fail",
        "t.py::d": "fail",  # Not run at all.
    }
    unittest_out = (
        "test_a (pkg.mod.Case.test_a) ... ok\n"
        "test_b (pkg.mod.Case)\nA docstring line. ... FAIL\n"
        "test_c (pkg.mod.Case.test_c) ... skipped 'no db'\n"
    )
    ids = ["test_a (pkg.mod.Case)", "test_b (pkg.mod.Case)", "test_c (pkg.mod.Case)"]
    assert outcomes(unittest_out, ids) == dict(zip(ids, ["pass", "fail", "fail"], strict=True))
    assert command_for("run", ["test_a (pkg.mod.Case)", "t.py::x y"]) == (
        "run pkg.mod.Case.test_a 't.py::x y'"
    )


def _records(*events: object) -> list[Record]:
    return [
        Record(session_id="s1", seq=i, at=100.0 + i, event=e)  # type: ignore[arg-type]
        for i, e in enumerate(events, start=1)
    ]


def _completed(calls: tuple[ToolCall, ...], tokens: int, cache_read: int = 0) -> ModelCompleted:
    usage = Usage(model="m", input_tokens=tokens, output_tokens=10, cache_read_tokens=cache_read)
    return ModelCompleted(
        request_id="r", message=AssistantTurn(text="", tool_calls=calls), usage=usage
    )


def test_metrics_count_retries_verifications_loops_and_cache_reads() -> None:
    read = ToolCall(id="c1", name="read_file", arguments='{"path": "/w/./src/m.py"}')
    edit = ToolCall(id="c2", name="edit_file", arguments='{"path": "src/m.py"}')
    records = _records(
        SessionStarted(session_id="s1", task="t", cwd="/w", model="m"),
        ModelRetrying(request_id="r", attempt=1, delay_s=1.0, error_kind="x", message="y"),
        _completed((read,), 90, cache_read=100),
        ToolCallRequested(call=read),
        ToolFinished(call_id="c1", name="read_file", content="..."),
        LoopDetected(pattern="repeat", action="warn", detail="d"),
        _completed((edit,), 190),
        ToolCallRequested(call=edit),
        FileChanged(call_id="c2", path="src/m.py", before_hash="a", after_hash="b"),
        ToolFinished(call_id="c2", name="edit_file", content="ok"),
        VerificationFinished(ok=False),
        VerificationFinished(round=2, ok=True),
        _completed((), 0),
        SessionFinished(reason="done"),
    )
    m = compute(records, ["src/m.py", "src/other.py"])
    assert (m.turns, m.retries, m.verify_rounds, m.loops, m.compactions) == (3, 1, 2, 1, 0)
    assert (m.input_tokens, m.output_tokens, m.cache_read_tokens) == (280, 30, 100)
    assert m.files_read == ("src/m.py",) and m.files_edited == ("src/m.py",)
    assert (m.loc_precision, m.loc_recall, m.gold_edit_recall) == (1.0, 0.5, 0.5)
    assert m.edit_apply_success == 1.0 and m.finish_reason == "done"
    assert m.token_efficiency == pytest.approx((200 + 200) / 410)
    assert m.wall_s == pytest.approx(13.0)


def test_a_line_cut_short_is_not_a_finished_task(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.root.mkdir()
    folder.append_result({"instance_id": "a", "status": "resolved"})
    with folder.results_file.open("a") as handle:
        handle.write('{"instance_id": "b", "sta')  # A write the machine never finished.
    assert folder.finished_ids() == {"a"}
    folder.append_result({"instance_id": "c", "status": "error"})
    assert [r["instance_id"] for r in folder.results()] == ["a", "c"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "missing.jsonl: suite file not found"),
        (["bad.jsonl"], "bad.jsonl: line 2: not valid JSON"),
        (["suite.jsonl", "--instances", "textkit-1,nope"], "unknown instance(s): nope"),
        (["suite.jsonl"], "no repository for example/textkit: pass --repos DIR"),
        (["suite.jsonl", "--repos", "elsewhere"], "no repository for example/textkit in"),
    ],
)
def test_bad_input_gets_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    suite, _ = build_suite(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "bad.jsonl").write_text(suite.read_text().splitlines()[0] + "\n{oops\n")
    for key, value in isolated_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(eval_app, ["run", *args, "--model", "scripted:x.json"])
    assert done.exit_code == 2
    assert message in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)


def test_report_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    done = CliRunner().invoke(eval_app, ["report", "nope", "--runs-dir", str(tmp_path)])
    assert done.exit_code == 2
    assert "no evaluation run 'nope'" in done.output
