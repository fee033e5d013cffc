"""classify_rules, classify.py and classify_enrich on hand-written result lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from classify import main
from classify_enrich import mismatches_by_blob
from classify_rules import cause_of, classify, mark_own_scripts, output_differs, producers
from replay_git import split_patch


def _result(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "instance_id": "x__x-1",
        "status": "mismatch",
        "orig_resolved": True,
        "finish": {"reason": "done", "detail": ""},
        "n_steps": 3,
        "steps_ran": 3,
        "denied": [],
        "loop": [],
        "diverged_steps": [],
        "mismatch_paths": [],
        "env_preexisting_paths": [],
        "path_producers": {},
    }
    return {**base, **fields}


def _diverged(step: int, tail: str, rc: int | None = 1) -> dict[str, Any]:
    return {
        "step": step,
        "command": f"cmd {step}",
        "orig_rc": 0,
        "replay_rc": rc,
        "head": "",
        "tail": tail,
    }


def test_an_identical_tree_after_a_finished_session_is_identical() -> None:
    assert classify(_result(status="identical")).cls == "identical"


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ({"reason": "loop", "detail": "same call 5 times"}, "early-stop:loop"),
        ({"reason": "budget", "detail": "turns budget spent: 100 of 100"}, "early-stop:max_turns"),
        ({"reason": "budget", "detail": "cost budget spent: 2 of 2"}, "early-stop:budget"),
        ({"reason": "unverified", "detail": ""}, "early-stop:verification"),
        (
            {"reason": "error", "detail": "the scripted model has no more replies"},
            "early-stop:error",
        ),
        (None, "early-stop:no-finish"),
    ],
)
def test_a_session_that_stopped_early_is_an_early_stop_even_with_the_same_tree(
    finish: dict[str, str] | None, expected: str
) -> None:
    verdict = classify(_result(status="identical", finish=finish, steps_ran=1))
    assert verdict.cls == expected
    assert "1 of 3 steps ran" in verdict.evidence[0]


def test_a_done_session_that_skipped_steps_is_incomplete() -> None:
    assert classify(_result(status="identical", steps_ran=2)).cls == "early-stop:incomplete"


def test_files_only_the_original_image_changed_are_identical_modulo_env() -> None:
    verdict = classify(
        _result(mismatch_paths=[["M", "setup.py"]], env_preexisting_paths=["setup.py"])
    )
    assert verdict.cls == "identical-modulo-env"
    assert "setup.py" in verdict.evidence[0]


def test_a_denied_call_makes_a_difference_refused() -> None:
    denied = [{"call_id": "call_1_0", "decided_by": "classifier", "reason": "rm -rf /"}]
    verdict = classify(_result(mismatch_paths=[["M", "a.py"]], denied=denied))
    assert verdict.cls == "refused"
    assert "classifier" in verdict.evidence[0]


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("sed: couldn't open temporary file ./sedX: Read-only file system", "sandbox"),
        ("pip: Failed to establish a new connection: Network is unreachable", "sandbox"),
        ("python: can't open file '/tmp/repro.py': [Errno 2] No such file", "sandbox"),
        ("ModuleNotFoundError: No module named 'erfa'", "environment"),
        ("  File 'x.py'\nSyntaxError: invalid syntax", "environment"),
        ("AttributeError: module 'numpy' has no attribute 'float'", "environment"),
        ("fatal: unable to read 34d568d1475966f07b7fa098e1a9f1ca1e73c19b", "environment"),
        ("AssertionError: 2 != 3", "kestrel-defect"),
    ],
)
def test_a_differing_file_takes_the_cause_of_the_diverged_step_that_made_it(
    tail: str, expected: str
) -> None:
    verdict = classify(
        _result(
            mismatch_paths=[["D", "out.txt"]],
            path_producers={"out.txt": [0, 2]},
            diverged_steps=[_diverged(2, tail)],
        )
    )
    assert verdict.cls == expected
    assert verdict.evidence[0].startswith("out.txt: step 2 `cmd 2` rc 0 -> 1")


def test_a_difference_no_diverged_step_explains_is_a_kestrel_defect() -> None:
    verdict = classify(
        _result(
            mismatch_paths=[["M", "a.py"], ["D", "out.txt"]],
            path_producers={"a.py": [1], "out.txt": [2]},
            diverged_steps=[_diverged(2, "ModuleNotFoundError: No module named 'x'")],
        )
    )
    assert verdict.cls == "kestrel-defect"
    assert verdict.evidence[0] == "a.py: differs, and every step that names it ran as before"


def test_the_worst_cause_over_the_files_wins() -> None:
    verdict = classify(
        _result(
            mismatch_paths=[["D", "a.txt"], ["D", "b.txt"]],
            path_producers={"a.txt": [0], "b.txt": [1]},
            diverged_steps=[
                _diverged(0, "ImportError: cannot import name 'x'"),
                _diverged(1, "touch: cannot touch '/x': Read-only file system"),
            ],
        )
    )
    assert verdict.cls == "sandbox"


def test_a_program_this_machine_has_but_the_command_did_not_find_is_the_sandbox() -> None:
    step = {**_diverged(0, "bash: line 1: django-admin: command not found", rc=127)}
    assert cause_of(step) == ("environment", "program not installed")
    assert cause_of({**step, "host_has_program": True})[0] == "sandbox"


def test_a_timed_out_step_has_no_known_cause() -> None:
    assert cause_of(_diverged(0, "", rc=None) | {"interrupted": True})[0] == "unexplained"


def test_producers_follow_a_script_written_by_a_heredoc_then_run() -> None:
    commands = [
        "cat <<'EOF' > /testbed/gen.py\nopen('out.fits', 'wb')\nEOF",
        "ls",
        "cd /testbed && python gen.py",
        "grep -n out.fits notes.md",
    ]
    assert producers("data/out.fits", commands) == [0, 2, 3]


def test_binary_sections_keep_their_blob_ids_and_older_lines_compare_by_them() -> None:
    patch = (
        "diff --git a/a.py b/a.py\nindex 1111111..2222222 100644\n--- a/a.py\n+++ b/a.py\n"
        "diff --git a/t.fits b/t.fits\nnew file mode 100644\nindex 0000000000..672041e2ba\n"
        "Binary files /dev/null and b/t.fits differ\n"
    )
    sections = split_patch(patch)
    assert [(s.path, s.binary, s.new_blob) for s in sections] == [
        ("a.py", False, "2222222"),
        ("t.fits", True, "672041e2ba"),
    ]
    replay = "diff --git a/a.py b/a.py\nindex 1111111..2222222abc 100644\n"
    assert mismatches_by_blob(patch, replay) == [["D", "t.fits"]]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_command_line_prints_the_table_and_the_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        _result(instance_id="a__a-1", status="identical"),
        _result(instance_id="b__b-1", finish={"reason": "loop", "detail": "x"}),
        _result(instance_id="b__b-1", status="identical"),  # a rerun: the last line wins
        _result(instance_id="c__c-1", orig_resolved=False, mismatch_paths=[["M", "a.py"]]),
    ]
    results = _write(tmp_path / "results.jsonl", rows)
    assert main([str(results)]) == 0
    text = capsys.readouterr().out
    assert "identical                       2        2  a__a-1 b__b-1" in text
    assert "kestrel-defect                  1        0  c__c-1" in text
    assert main([str(results), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "| kestrel-defect | 1 | 0 | c__c-1 |" in md
    assert "| c__c-1 | no | kestrel-defect | a.py: differs" in md
    assert "- loop-detector stops: 0" in md


def test_a_results_file_that_is_not_json_lines_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "r.jsonl"
    bad.write_text('{"instance_id": "a"}\nnot json\n')
    assert main([str(bad)]) == 2
    assert capsys.readouterr().err == f"classify.py: {bad}:2 is not a JSON line\n"


def test_a_missing_file_takes_the_cause_of_the_earlier_step_that_failed_to_make_it() -> None:
    steps = [
        _diverged(1, "ModuleNotFoundError: No module named 'django'"),
        _diverged(4, "bash: line 1: cd: proj: No such file or directory"),
    ]
    verdict = classify(
        _result(
            mismatch_paths=[["D", "proj/out.txt"]],
            path_producers={"proj/out.txt": [4]},
            diverged_steps=steps,
        )
    )
    assert verdict.cls == "environment"
    assert "follows step 1" in verdict.evidence[0]
    alone = classify(
        _result(
            mismatch_paths=[["D", "proj/out.txt"]],
            path_producers={"proj/out.txt": [4]},
            diverged_steps=steps[1:],
        )
    )
    assert alone.cls == "kestrel-defect"


def test_a_blocking_verification_that_asked_past_the_script_is_a_verification_stop() -> None:
    verify = [
        {"round": 1, "ok": False, "blocking": True, "report": "pytest: failed\nNo module named 'x'"}
    ]
    finish = {
        "reason": "error",
        "detail": "ScriptExhausted: the scripted model has no more replies",
    }
    verdict = classify(_result(status="identical", finish=finish, verify=verify))
    assert verdict.cls == "early-stop:verification"
    assert verdict.evidence[1] == (
        "blocking verification round 1: pytest: failed | No module named 'x'"
    )


def test_the_text_report_counts_diverged_steps_by_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = _result(
        status="identical",
        diverged_steps=[
            _diverged(0, "ModuleNotFoundError: No module named 'x'"),
            _diverged(1, "AssertionError"),
        ],
    )
    assert main([str(_write(tmp_path / "r.jsonl", [row]))]) == 0
    text = capsys.readouterr().out
    assert "      1  environment: missing Python module" in text
    assert "unexplained: x__x-1 step 1 rc 0 -> 1 `cmd 1`" in text


@pytest.mark.parametrize(
    ("before", "after", "differs"),
    [
        ("finished\n", "Traceback ...\nModuleNotFoundError: No module named 'x'\nfinished\n", True),
        ("", "E   ImportError: cannot import name 'y'\n", True),
        (
            "ModuleNotFoundError: No module named 'x'\n",
            "ModuleNotFoundError: No module named 'x'\n",
            False,
        ),
        ("", "try:\n    import x\nexcept ImportError:\n    x = None\n", False),
        ("", "AssertionError: 1 != 2\n", False),
    ],
)
def test_a_failure_only_the_output_shows_counts_as_a_divergence(
    before: str, after: str, differs: bool
) -> None:
    assert output_differs(before, after) is differs


def test_a_syntax_error_in_a_script_the_replay_wrote_is_not_the_environment() -> None:
    tail = (
        '  File "/testbed/repro.py", line 3\n    print(x\n         ^\nSyntaxError: invalid syntax'
    )
    old_code = tail.replace("/testbed/repro.py", "/testbed/pkg/old.py")
    steps = [_diverged(1, tail), _diverged(2, old_code)]
    mark_own_scripts(steps, ["cat <<'EOF' > /testbed/repro.py\nprint(x)\nEOF", "python repro.py"])
    assert cause_of(steps[0]) == ("unexplained", "repro.py, which a replayed command wrote, fails")
    assert cause_of(steps[1]) == ("environment", "old code on this interpreter")


def test_the_markdown_names_no_folder_of_the_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    detail = "ScriptExhausted: no more replies (script /srv/replays/runs/x__x-1/script.json)"
    row = _result(status="identical", finish={"reason": "error", "detail": detail})
    assert main([str(_write(tmp_path / "r.jsonl", [row])), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "(script script.json)" in md and "/srv" not in md


def test_a_stream_that_is_not_utf8_is_a_kestrel_defect_whatever_the_tree() -> None:
    verdict = classify(_result(status="identical", stdout_utf8=False))
    assert verdict.cls == "kestrel-defect"
    assert verdict.evidence == ["Kestrel's stream-json output is not valid UTF-8"]
