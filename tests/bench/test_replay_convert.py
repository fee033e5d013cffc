"""convert.py: which assistant messages become scripted turns, and what becomes the final text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from convert import TIMEOUT_S, ConvertError, convert, main, submission_prefix

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"


def _traj(*messages: dict[str, str], submission: str = "") -> dict[str, object]:
    task = "<pr_description>\nConsider the following PR description:\nFix it.\n</pr_description>"
    return {
        "instance_id": "x__x-1",
        "info": {"exit_status": "Submitted", "submission": submission},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": task},
            *messages,
        ],
    }


def _say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _obs(rc: int, out: str = "") -> dict[str, str]:
    return {"role": "user", "content": f"<returncode>{rc}</returncode>\n<output>\n{out}</output>"}


def test_one_bash_block_is_one_bash_call_with_the_original_timeout() -> None:
    conv = convert(_traj(_say("THOUGHT: look\n\n```bash\nls -la\n```"), _obs(2, "no")))
    assert conv.script == [
        {
            "text": "THOUGHT: look",
            "tool_calls": [
                {"name": "bash", "arguments": {"command": "ls -la", "timeout": TIMEOUT_S}}
            ],
        },
        {"text": "The recorded run ended without submitting (Submitted)."},
    ]
    assert [(s.index, s.command, s.orig_returncode) for s in conv.steps] == [(0, "ls -la", 2)]
    assert conv.task == "Fix it."
    assert not conv.submitted


def test_messages_with_zero_or_two_blocks_ran_nothing_and_become_no_turn() -> None:
    conv = convert(
        _traj(
            _say("```bash\nls a\n```\n```bash\nls b\n```"),
            {"role": "user", "content": "Please always provide EXACTLY ONE action"},
            _say("no command here"),
            {"role": "user", "content": "Please always provide EXACTLY ONE action"},
            _say("```bash\nls c\n```"),
            _obs(0),
        )
    )
    assert conv.format_errors == 2
    assert [s.command for s in conv.steps] == ["ls c"]
    assert len(conv.script) == 2


def test_the_submission_step_becomes_the_final_text_and_is_not_run() -> None:
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    conv = convert(
        _traj(
            _say("```bash\nsed -i s/a/b/ f.py\n```"),
            _obs(0),
            _say(f"THOUGHT: all done.\n\n```bash\n{submit}\n```"),
            {"role": "user", "content": "diff --git a/f.py b/f.py\n"},
            submission="diff --git a/f.py b/f.py\n",
        )
    )
    assert conv.submitted
    assert conv.script[-1] == {"text": "THOUGHT: all done."}
    assert [s.command for s in conv.steps] == ["sed -i s/a/b/ f.py"]
    assert conv.meta()["submission"] == "diff --git a/f.py b/f.py\n"


def test_what_the_submit_command_ran_before_the_token_is_replayed() -> None:
    """The original ran the whole command: a clean-up before the echo changed the tree."""
    submit = "rm -rf reproduction\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A"
    conv = convert(
        _traj(
            _say("```bash\nmkdir reproduction\n```"),
            _obs(0),
            _say(f"THOUGHT: clean up and submit.\n\n```bash\n{submit}\n```"),
            {"role": "user", "content": "diff --git a/f.py b/f.py\n"},
        )
    )
    assert [s.command for s in conv.steps] == ["mkdir reproduction", "rm -rf reproduction"]
    assert conv.steps[-1].orig_returncode is None
    assert conv.script[-2]["text"] == "THOUGHT: clean up and submit."
    assert conv.script[-1] == {"text": "Done."}
    assert submission_prefix("cd /testbed && echo 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT'") == (
        "cd /testbed"
    )
    assert submission_prefix("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff") == ""


def test_a_submit_command_that_did_not_end_the_run_is_an_ordinary_step() -> None:
    echo = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; false"
    conv = convert(_traj(_say(f"```bash\n{echo}\n```"), _obs(1), _say("```bash\nls\n```"), _obs(0)))
    assert [s.command for s in conv.steps] == [echo, "ls"]
    assert not conv.submitted


def test_an_output_without_return_code_leaves_it_unknown() -> None:
    timed_out = {"role": "user", "content": "The last command timed out and has been killed."}
    conv = convert(_traj(_say("```bash\nsleep 100\n```"), timed_out, _say("```bash\nls\n```")))
    assert [s.orig_returncode for s in conv.steps] == [None, None]


@pytest.mark.parametrize(
    ("traj", "words"),
    [
        ([], "JSON object"),
        ({"messages": []}, "no 'messages'"),
        ({"messages": [{"content": "x"}]}, "message 0 has no 'role'"),
    ],
)
def test_what_is_not_a_trajectory_is_refused_in_words(traj: object, words: str) -> None:
    with pytest.raises(ConvertError, match=words):
        convert(traj)


def test_the_command_line_writes_script_and_meta(tmp_path: Path) -> None:
    out, meta = tmp_path / "script.json", tmp_path / "meta.json"
    assert main([str(FIXTURES / "demo__demo-1.traj.json"), str(out), "--meta", str(meta)]) == 0
    script = json.loads(out.read_text())
    assert [t.get("tool_calls", [{}])[0].get("name") for t in script] == ["bash", "bash", None]
    assert json.loads(meta.read_text())["format_errors"] == 2


def test_the_command_line_says_in_one_line_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([str(bad), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err
